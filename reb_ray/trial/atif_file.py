"""Each attempt's trajectory as an ATIF document (reb_ray.llm.atif), written as `trajectory.json`
beside the attempt's other artifacts; its path, relative to the output directory, goes into the
trials row's `atif_path` (null: the agent phase never started, or the file could not be written).

Which record the steps come from, by what the agent left:

- an agent that keeps a transcript of its own (codex and claude_code: their JSON events;
  mini_swe_agent and NexAU: their trajectories), stored as `trajectory.jsonl.gz`: that transcript,
  each model turn paired with the proxy's request log (`llm_requests.jsonl.gz`) for its tokens and
  cost when the counts agree;
- every other agent (`command`, the built-in baselines, a class path that writes none): the
  execs it ran through the sandbox (`TappedSandbox.commands`), one step each. The heuristic
  announces the commands it runs inside its one exec (`[heuristic] $ CMD` ... `[heuristic] exit N`);
  each becomes a step of its own after the exec's, with its exit code and its output. Those
  lines are read from the agent's full log when the agent ran exactly one exec (that log is then
  this exec's whole output, up to the artifact budget), else from the exec's kept output.

Its first steps are the prompt the agent was given (its system and task parts), as rendered
for this sandbox. The document's totals (`final_metrics`) are the trials row's tokens and cost, the proxy's meter.
It is written after every other column of the agent phase is known (in the closing steps of
the attempt, on every path that ran the agent), with the agent's credentials masked, as plain
JSON, atomically (a hidden `.part` name, then renamed): a row never names a torn file.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from reb_ray.llm.atif import trajectory

if TYPE_CHECKING:
    from reb_ray.redact import Redactor
    from reb_ray.trial.record import TrialRecorder

FILE_NAME = "trajectory.json"
#: Bytes of a staged transcript or request log read back (the transcript is kept to 32 MiB).
READ_LIMIT = 64 * 1024 * 1024
_ANNOUNCED = re.compile(r"^\[heuristic\] \$ (.*)$")
_ANNOUNCED_EXIT = re.compile(r"^\[heuristic\] exit (-?\d+)$")


def _staged(rec: TrialRecorder, column: str) -> bytes | None:
    rel = rec.row.get(column)
    if not rel or rec.artifacts is None:
        return None
    try:
        with gzip.open(rec.artifacts.output_dir / rel, "rb") as f:
            return f.read(READ_LIMIT)
    except (OSError, EOFError):
        return None


def announced(output: str, within: str) -> list[dict]:
    """The commands an exec's `output` announces (`[heuristic] $ CMD`, then the lines it printed,
    then `[heuristic] exit N`), as command records marked `within` the exec that ran them; the
    exit code None when no exit line follows before the next command or the end."""
    found: list[dict] = []
    current: dict | None = None
    lines: list[str] = []
    for line in output.splitlines():
        if m := _ANNOUNCED.match(line):
            if current is not None:
                current["output"] = "\n".join(lines)
            current = {"type": "command", "command": m.group(1), "exit_code": None, "within": within}
            found.append(current)
            lines = []
        elif current is not None and current["exit_code"] is None and (m := _ANNOUNCED_EXIT.match(line)):
            current["exit_code"] = int(m.group(1))
            current["output"], lines, current = "\n".join(lines), [], None
        elif current is not None:
            lines.append(line)
    if current is not None:
        current["output"] = "\n".join(lines)
    return found


def exec_transcript(commands: list[dict], agent_log: bytes | None) -> bytes | None:
    """A transcript of reb-ray command records from the execs an agent ran (module docstring);
    None when it ran none."""
    if not commands:
        return None
    events: list[dict] = []
    for i, command in enumerate(commands, start=1):
        events.append(command)
        output = command.get("output") or ""
        if len(commands) == 1 and agent_log is not None:
            output = agent_log.decode("utf-8", errors="replace")
        events.extend(announced(output, f"cmd-{i}") if "[heuristic] $ " in output else [])
    return ("\n".join(json.dumps(e) for e in events) + "\n").encode()


def document(rec: TrialRecorder, commands: list[dict] | None) -> dict:
    """The ATIF document of the attempt recorded in `rec` (module docstring)."""
    transcript = _staged(rec, "trajectory_path")
    if transcript is None:
        transcript = exec_transcript(commands or [], _staged(rec, "agent_log_path"))
    prompt = rec.agent_prompt
    return trajectory(rec.row, transcript, _staged(rec, "llm_log_path"),
                      (prompt.system, prompt.task) if prompt is not None else None)


def write(rec: TrialRecorder, commands: list[dict] | None, redactor: Redactor) -> dict:
    """Write the attempt's `trajectory.json` and return the trials column {"atif_path": path};
    `commands` are the agent's execs (None: the agent phase never started, and nothing is
    written). Never raises: a file that cannot be written leaves the path null."""
    if commands is None or rec.artifacts is None:
        return {}
    try:
        doc = redactor.value(document(rec, commands))
        rel = f"{rec.artifacts.rel_dir}/{FILE_NAME}"
        final = Path(rec.artifacts.output_dir) / rel
        final.parent.mkdir(parents=True, exist_ok=True)
        part = final.with_name(f".{final.name}.part")
        data = json.dumps(doc, ensure_ascii=False).encode()
        part.write_bytes(data)
        os.replace(part, final)
        rec.artifacts.spent += len(data)
    except Exception:  # noqa: BLE001 - a trajectory that cannot be written must not lose the attempt's rows
        return {"atif_path": None}
    return {"atif_path": rel}
