"""What the codex and claude_code runners share: one LLM CLI session inside the sandbox.

A run is five steps, each one exec or copy (so the phase's overhead beyond the model session,
CLI start-up included, stays under a second: benchmarks/agent_overhead.py measures it):

1. `<toolchain>/bin/<cli> --version` (the row's `agent_version`; exit 127 from the wrapper
   means the toolchain part is not installed: InfraError `infra_toolchain`, never the agent's);
2. the CLI's own state directory (`<repo>/../.reb-ray-agent/<cli>-home`, its config files
   written by the runner) copied in;
3. the CLI itself, in the repository root, with the agent timeout `ctx.timeout_s`, stdin
   closed, stdout (its JSON events) streamed through `JsonLines` (reb_ray.agents.cli_events)
   and stderr into a file;
4. one clean-up exec: the last STDERR_TAIL_BYTES of stderr, the state directory removed (the
   probes never see the CLI's sessions or config), and whether the report file exists;
5. when the agent wrote no report but its final message holds a JSON object, that object is
   written as the report (`report_source = forced_from_output`).

The CLI's environment (`runner_support.cli_env`): the spec's `env`, then `ctx.env` less the
driver's credential variables and every provider key variable reb-ray knows (the real key stays
with the metering proxy, so no agent can read it; the CLI only ever gets `ctx.llm.api_key`, the
trial's stand-in), then what the kind sets, with
PATH = the image's system PATH (the CLI is called by its absolute path, so the toolchain's
bin/ is not on the agent's commands' PATH).
"""

from __future__ import annotations

import abc
import json
import posixpath
import re
import tempfile
import time
from pathlib import Path

from reb_ray.agents.base import Agent, AgentContext, AgentRun, LlmAccess
from reb_ray.agents import runner_support
from reb_ray.agents.cli_events import JsonLines
from reb_ray.errors import InfraError
from reb_ray.sandbox.base import SYSTEM_PATH
from reb_ray.sandbox import Sandbox

STDERR_TAIL_BYTES = 16 * 1024
SETUP_TIMEOUT_S = 60.0  # each of the version and clean-up execs
_VERSION = re.compile(r"\d+\.\d+\.\d+[\w.+-]*")
#: Runs the CLI with stdin closed (codex reads extra input from an open stdin) and stderr in $1.
_LAUNCH = 'f=$1; shift; exec "$@" </dev/null 2>"$f"'
#: Prints the stderr tail, removes the CLI's state, exits 0 iff the report file exists.
_FINISH = 'tail -c "$4" "$1" 2>/dev/null; rm -rf "$1" "$2"; rmdir "$(dirname "$2")" 2>/dev/null; test -e "$3"'


class CliSession(abc.ABC):
    """What one kind reads from its CLI's JSON events (`fold` gets each one, in order)."""

    @abc.abstractmethod
    def fold(self, event: dict) -> None:
        """Take the next event (a JSON object printed by the CLI)."""

    @abc.abstractmethod
    def reported_usage(self) -> dict | None:
        """The CLI's own usage in AgentRun.reported_usage's convention; None when it reported none."""

    @abc.abstractmethod
    def final_report(self) -> dict | None:
        """The report the agent's final answer holds (a JSON object), None when it holds none."""

    def limit(self, llm: LlmAccess) -> str | None:
        """Which of the CLI's own limits ended the session (`max_turns=N`), if one did."""
        return None


class LlmCliAgent(Agent):
    """The shared run of an LLM CLI kind (module docstring). A kind sets `cli` (its wrapper in
    `<toolchain>/bin`) and gives its arguments, environment, config files and event reader."""

    uses_toolchain = True
    uses_llm = True
    cli: str = ""

    @abc.abstractmethod
    def cli_args(self, prompt: str, llm: LlmAccess) -> list[str]:
        """The CLI's arguments for the task `prompt` (the spec's `extra_args` last)."""

    @abc.abstractmethod
    def cli_env(self, ctx: AgentContext, llm: LlmAccess, home: str) -> dict[str, str]:
        """Variables the kind sets on top of the common environment; `home` is its state directory."""

    @abc.abstractmethod
    def home_files(self, ctx: AgentContext, llm: LlmAccess) -> dict[str, str]:
        """Files to pre-write in the state directory: relative path -> text."""

    @abc.abstractmethod
    def session(self) -> CliSession:
        """A fresh reader for this run's events."""

    def run(self, sandbox: Sandbox, ctx: AgentContext) -> AgentRun:
        """Run the CLI to its end or to `ctx.timeout_s`. Raises InfraError when the trial gave no
        toolchain or no LLM access (a harness bug) or the toolchain part is missing, and
        RebRayError when the sandbox is gone; an agent failure is a non-zero exit code."""
        started = time.monotonic()
        if ctx.toolchain is None:
            raise InfraError("infra_toolchain", f"agent {self.name!r}: no agent toolchain mounted for kind {self.cli!r}")
        if ctx.llm is None or ctx.prompt is None:
            raise InfraError("infra_harness", f"agent {self.name!r}: the trial gave no LLM access or no prompt")
        llm = ctx.llm
        cli = f"{ctx.toolchain}/bin/{self.cli}"
        agent_dir = posixpath.normpath(f"{ctx.repo_dir}/../.reb-ray-agent")
        home, stderr_file = f"{agent_dir}/{self.cli}-home", f"{agent_dir}/{self.cli}.stderr"
        version = self._version(sandbox, cli)
        self._write_home(sandbox, home, self.home_files(ctx, llm))
        session = self.session()
        events = JsonLines(session.fold)
        env = runner_support.cli_env(self, ctx, {"PATH": SYSTEM_PATH, **self.cli_env(ctx, llm, home)})
        result = sandbox.exec(["sh", "-c", _LAUNCH, "reb-ray-agent", stderr_file, cli, *self.cli_args(ctx.prompt.text, llm)],
                              timeout=ctx.timeout_s, env=env, workdir=ctx.repo_dir, sink=events)
        events.close()
        finish = sandbox.exec(["sh", "-c", _FINISH, "finish", stderr_file, home, ctx.report_path, str(STDERR_TAIL_BYTES)],
                              timeout=SETUP_TIMEOUT_S)
        run = AgentRun.from_exec(result, ctx.timeout_s, started)
        stderr = finish.output.strip()
        if stderr:
            run.output = f"{run.output.rstrip()}\n[{self.cli} stderr, last {STDERR_TAIL_BYTES} bytes at most]\n{stderr}\n"
        run.agent_version, run.transcript = version, events.transcript(with_times=True)
        run.reported_usage = session.reported_usage()
        if run.reported_usage:
            run.input_tokens = run.reported_usage.get("input_tokens")
            run.output_tokens = run.reported_usage.get("output_tokens")
        run.limit = run.limit or session.limit(llm)
        report = session.final_report()
        if report is not None and finish.exit_code == 1:  # 1: no report file (others: the check failed)
            sandbox.write_bytes(ctx.report_path, (json.dumps(report, indent=2) + "\n").encode())
            run.report_source = "forced_from_output"
        run.wall_time_s = time.monotonic() - started
        return run

    def _version(self, sandbox: Sandbox, cli: str) -> str | None:
        result = sandbox.exec([cli, "--version"], timeout=SETUP_TIMEOUT_S, env={"PATH": SYSTEM_PATH})
        if result.exit_code == 127 and "reb-ray toolchain:" in result.output:
            raise InfraError("infra_toolchain", result.output.strip().splitlines()[-1][:300])
        if not result.ok:
            return None
        match = _VERSION.search(result.output)
        return match.group(0) if match else (result.output.strip().splitlines() or [None])[0]

    @staticmethod
    def _write_home(sandbox: Sandbox, home: str, files: dict[str, str]) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "home"
            root.mkdir()
            for name, text in files.items():
                (root / name).parent.mkdir(parents=True, exist_ok=True)
                (root / name).write_text(text)
            sandbox.put(root, home)


def usage_dict(input_tokens, cached, cache_write, output_tokens, reasoning, cost_usd=None) -> dict | None:
    """AgentRun.reported_usage from the CLI's numbers (each an int, or None = not reported;
    input includes cached and cache-written, output includes reasoning); None when all are None."""
    values = {"input_tokens": input_tokens, "cached_input_tokens": cached, "cache_write_tokens": cache_write,
              "output_tokens": output_tokens, "reasoning_tokens": reasoning, "cost_usd": cost_usd}
    kept = {k: v for k, v in values.items() if v is not None}
    return kept or None


def as_count(value) -> int | None:
    """A token count from a CLI's JSON (a non-negative int), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
