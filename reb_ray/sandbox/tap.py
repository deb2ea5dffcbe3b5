"""A view of a sandbox that copies the output of every exec to one sink (the agent's full log).

An agent may run any number of execs; the trial hands it `TappedSandbox(sandbox, log)` so the
whole agent output lands in one artifact whatever the agent's code does, and counts the bytes
its execs printed (for the agent row's `output_dropped_bytes`).

It also keeps a record of each exec (`commands`), in reb-ray's own transcript shape
`{"type": "command", "command", "exit_code", "timed_out", "duration_s", "output"}`: for an
agent that keeps no transcript of its own (`command`, the built-in baselines) these are the
steps of its trajectory. Bounded: the first COMMANDS_KEPT execs, each with its kept output cut
to OUTPUT_CHARS characters (head and tail), so a chatty agent cannot grow the trial's memory.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Mapping, Sequence

from reb_ray.sandbox.base import DEFAULT_READ_LIMIT, ExecResult, Sandbox, SandboxProcess, SandboxSize
from reb_ray.sandbox.output import OutputSink

COMMANDS_KEPT = 10_000
OUTPUT_CHARS = 20_000


class _Tee:
    def __init__(self, *sinks: OutputSink) -> None:
        self._sinks = sinks

    def write(self, data: bytes) -> None:
        for sink in self._sinks:
            sink.write(data)


class TappedSandbox(Sandbox):
    """`inner` with every exec's output also written to `sink` (None: only counted); everything
    else delegated.

    `total_bytes` / `truncated` / `execs`: bytes printed by all execs, whether any exec's kept
    output was cut, and how many execs ran through this view; `commands` their records (module
    docstring).
    """

    def __init__(self, inner: Sandbox, sink: OutputSink | None) -> None:
        self._inner = inner
        self._sink = sink
        self.provider = inner.provider
        self.capabilities = inner.capabilities
        self.leftovers_script = inner.leftovers_script
        self.workdir = inner.workdir
        self.total_bytes = 0
        self.truncated = False
        self.execs = 0
        self.commands: list[dict] = []

    def exec(self, cmd: str | Sequence[str], timeout: float | None = None, env: Mapping[str, str] | None = None,
             workdir: str | None = None, user: str | None = None, *, watch: Sequence[str] = (),
             sink: OutputSink | None = None) -> ExecResult:
        tee = sink if self._sink is None else self._sink if sink is None else _Tee(sink, self._sink)
        result = self._inner.exec(cmd, timeout, env, workdir, user, watch=watch, sink=tee)
        self.execs += 1
        self.total_bytes += result.total_bytes
        self.truncated = self.truncated or result.truncated
        if len(self.commands) < COMMANDS_KEPT:
            self.commands.append(command_record(cmd, result))
        return result

    def put(self, src: Path | str, dest: str) -> None:
        self._inner.put(src, dest)

    def get(self, src: str, dest: Path | str) -> None:
        self._inner.get(src, dest)

    def put_tar(self, archive: Path, dest_dir: str) -> None:
        self._inner.put_tar(archive, dest_dir)

    def write_bytes(self, dest: str, data: bytes) -> None:
        self._inner.write_bytes(dest, data)

    def read_bytes(self, src: str, limit: int = DEFAULT_READ_LIMIT) -> bytes:
        return self._inner.read_bytes(src, limit)

    def size(self, timeout: float = 60.0) -> SandboxSize:
        return self._inner.size(timeout)

    def kill_leftovers(self) -> list[str] | None:
        return self._inner.kill_leftovers()

    def process_table(self) -> list[SandboxProcess] | None:
        return self._inner.process_table()

    def blobs_outside(self, root: str, paths: list[str]) -> dict[str, str | None] | None:
        return self._inner.blobs_outside(root, paths)

    def close(self) -> None:
        self._inner.close()


def command_record(cmd: str | Sequence[str], result: ExecResult) -> dict:
    """One exec as a transcript record (module docstring); an output longer than OUTPUT_CHARS
    keeps its first and last halves around a marked cut."""
    output = result.output
    if len(output) > OUTPUT_CHARS:
        half = OUTPUT_CHARS // 2
        output = f"{output[:half]}\n[... {len(output) - 2 * half} characters cut ...]\n{output[-half:]}"
    if result.dropped_bytes:
        output += f"\n[... {result.dropped_bytes} bytes of output not kept by the sandbox ...]"
    return {"type": "command", "command": cmd if isinstance(cmd, str) else shlex.join(str(c) for c in cmd),
            "exit_code": result.exit_code, "timed_out": result.timed_out, "duration_s": round(result.duration_s, 3),
            "output": output}
