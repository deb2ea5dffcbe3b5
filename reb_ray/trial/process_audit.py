"""No process of the agent reaches the probe phase: the sandbox's process list, read from outside.

Between the phases every process the harness did not start is killed (the sandbox's
`leftovers_script`), and the harness's own are known by the PIDs recorded when the sandbox
started, never by command line, parent or session: a daemon started as `exec -a sleep` under
`setsid`, re-parented to the init by a double fork, looks like the keep-alive to anything
inside and is killed all the same. The kill runs inside the sandbox, with the sandbox's own
shell and tools, which the agent may have replaced; so the proof is read from outside: the
engine's list of the sandbox's processes (its cgroup, with host PIDs), where no process can
hide or rename itself, once when the probe phase begins (`before_probes`) and once after its
last stage (`after_probes`).

Before the probes: any process the harness did not start is killed again and the list read
again; one still alive then (the agent's code outlived two kills) makes every probe stage the
agent's failure (`agent_process_in_probes`, the command lines in the reason), and nothing is
probed. After the last stage the list is recorded as it is (a process a stage's command left
behind is the stage's, not evidence against the agent); a process that was already there
before the probes cannot be, since none was.
"""

from __future__ import annotations

import time

from reb_ray.grading.unmeasured import AGENT_PROCESS_IN_PROBES, PROBE_STAGES, agent_failed
from reb_ray.models.task import TaskSpec
from reb_ray.sandbox import Sandbox
from reb_ray.sandbox.base import SandboxProcess
from reb_ray.trial.result import OutsideView

COMMANDS_KEPT, COMMAND_CHARS = 20, 200  # bounds of `probe_process_commands`


def foreign(table: list[SandboxProcess] | None) -> list[SandboxProcess] | None:
    """The processes of `table` the harness did not start (None: no table)."""
    return None if table is None else [p for p in table if not p.own]


def _note(part: OutsideView, when: str, found: list[SandboxProcess]) -> None:
    kept = list(part.probe_process_commands or [])
    kept += [f"{when}: {p.command}"[:COMMAND_CHARS] for p in found]
    part.probe_process_commands = kept[:COMMANDS_KEPT]


def before_probes(sandbox: Sandbox, part: OutsideView, task: TaskSpec) -> list:
    """Read the sandbox's processes from outside as the probe phase begins; kill and read again
    what the harness did not start. Records `probe_processes_before` (the count found the first
    time: 0 is the proof) and their command lines. Returns the agent's failure verdicts of every
    probe stage when such a process is still alive after the second kill, else []."""
    t0 = time.monotonic()
    try:
        found = foreign(sandbox.process_table())
        part.probe_processes_before = None if found is None else len(found)
        if not found:
            return []
        _note(part, "before", found)
        sandbox.kill_leftovers()
        survivors = foreign(sandbox.process_table()) or []
        if not survivors:
            return []
        listed = "; ".join(p.command[:COMMAND_CHARS] for p in survivors[:5])
        return agent_failed(task, PROBE_STAGES, AGENT_PROCESS_IN_PROBES,
                            f"{len(survivors)} process(es) of the agent still ran in the sandbox when the probe phase "
                            f"began, after two kills (seen from outside, in its process list): {listed}")
    finally:
        _spent(part, t0)


def after_probes(sandbox: Sandbox, part: OutsideView) -> None:
    """Read the sandbox's processes from outside after the last stage: `probe_processes_after`
    and their command lines."""
    t0 = time.monotonic()
    found = foreign(sandbox.process_table())
    part.probe_processes_after = None if found is None else len(found)
    if found:
        _note(part, "after", found)
    _spent(part, t0)


def _spent(part: OutsideView, t0: float) -> None:
    part.outside_check_s = (part.outside_check_s or 0.0) + time.monotonic() - t0
