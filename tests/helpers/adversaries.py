"""Agents that take shortcuts, as `command` agents: each runs a shell script in the repository,
then writes a report naming the interpreter it wants graded. The adversarial suites
(tests/test_witness_adversarial.py, tests/test_witness_observed.py,
tests/test_installed_adversarial.py, tests/trial/test_outside_adversaries.py,
tests/test_shortcut_records.py) each declare their agents as one `AdversaryGroup`.

The groups of every such file the session collected run once per test process, as one batch of
trials two at a time (`adversary_runs` in tests/conftest.py, `run_groups` here), and each file
reads its own group's outcomes. Every trial still runs for real and with its own group's
settings (a group's trials share a `SweepConfig`; groups differ in the node's package cache,
the output directory, the agents' settings): what the batch shares is the two slots, so no
file waits on its last lone trial while a slot is idle, and the slowest trials start first.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

WHEELS = [Path("/opt/wheels")] if Path("/opt/wheels").is_dir() else []


def report(python: str, env_tool: str = "system") -> str:
    """A report naming `python` and claiming nothing else."""
    return json.dumps({"python_path": python, "python_version": None, "torch_version": None, "cuda_available": None,
                       "gpu_count": None, "ddp_expected_ok": None, "env_tool": env_tool, "env_name": None, "notes": None})


def write_file(path: str, body: str, mode: str = "755") -> str:
    """Shell that writes `body` to `path` with `mode`."""
    return f"mkdir -p {Path(path).parent} && cat > {path} <<'REBEOF'\n{body}\nREBEOF\nchmod {mode} {path}\n"


def command_specs(adversaries: dict[str, tuple[str, str]], env_tool: str = "system", shell: str = "sh") -> dict:
    """Agent specs of `adversaries` (name -> (shell script, reported python_path)): the script
    runs under `set -e` in the repository, then the report is written."""
    specs = {}
    for name, (script, python) in adversaries.items():
        write = f'mkdir -p "$(dirname "$1")" && printf "%s" {json.dumps(report(python, env_tool))} > "$1"'
        specs[name] = {"kind": "command", "command": [shell, "-c", f"set -e\n{script}\n{write}", "agent", "{report_path}"]}
    return specs


@dataclass(frozen=True)
class AdversaryGroup:
    """One file's agents and the settings they run with.

    `agents`: name -> a `command` agent spec (a dict), or the import path of an agent class
    ("module:Class"). `sweep_id` labels the group's containers and rows (groups may reuse an
    agent name). `pip_cache`: the node's package cache shared, where an agent takes its wheels
    from it. `output`: whether the trials deliver their artifacts to an output directory of the
    group's own, which the file then reads (else the default output, which nothing reads).
    `skip`: a reason not to run the group here (checked before the batch starts), or None.
    `first`: the group's trials start before the others' (they take longest: on two slots the
    batch ends sooner when the longest trials do not come last)."""

    sweep_id: str
    agents: dict[str, dict | str]
    task_id: str = "numpy-trainer"
    pip_cache: bool = False
    output: bool = False
    first: bool = False
    skip: Callable[[], str | None] | None = None

    def config(self, base: Path | None):
        from reb_ray.models.sweep import SweepConfig

        specs = {name: spec for name, spec in self.agents.items() if isinstance(spec, dict)}
        extra = {"output": base / self.sweep_id / "runs"} if self.output and base is not None else {}
        # no environment kept: nothing here is about keeping, and a kept image would outlive the test
        return SweepConfig(wheelhouses=WHEELS, pip_cache=self.pip_cache, agent_specs=specs, keep_environments="none",
                           **extra)


@dataclass
class GroupRun:
    """What one group's batch gave: {agent name: TrialOutcome}, the output directory its
    trials delivered to, or why it did not run."""

    outcomes: dict = field(default_factory=dict)
    output: Path | None = None
    skipped: str | None = None


def run_groups(groups: list[AdversaryGroup], image: str, base: Path | None = None, width: int = 2) -> dict[str, GroupRun]:
    """{sweep_id: GroupRun} of every group's agents on its demo task, `width` trials at a time
    (a sweep on this 2-core machine runs two), the `first` groups' trials first."""
    from reb_ray.models.sweep import TrialSpec
    from reb_ray.suite.load import load_suite

    tasks = {t.id: t for t in load_suite("demo")}
    runs: dict[str, GroupRun] = {}
    jobs = []
    for group in sorted(groups, key=lambda g: not g.first):
        reason = group.skip() if group.skip else None
        config = group.config(base)
        runs[group.sweep_id] = GroupRun(output=config.output.dir if group.output else None, skipped=reason)
        if reason is None:
            for name, spec in group.agents.items():
                agent = name if isinstance(spec, dict) else spec
                jobs.append((group.sweep_id, name, TrialSpec(sweep_id=group.sweep_id, agent=agent, task=tasks[group.task_id],
                                                             trial_index=0, config=config, image=image)))

    def one(job):
        from reb_ray.trial.run import run_trial

        sweep_id, name, spec = job
        t = time.monotonic()
        outcome = run_trial(spec)
        print(f"adversary {sweep_id}/{name}: {time.monotonic() - t:.1f} s")
        return outcome

    t0 = time.monotonic()
    with ThreadPoolExecutor(width) as pool:
        for (sweep_id, name, _), outcome in zip(jobs, pool.map(one, jobs)):
            runs[sweep_id].outcomes[name] = outcome
    print(f"adversaries: {len(jobs)} trials of {len(runs)} groups in {time.monotonic() - t0:.1f} s")
    return runs


def collected_groups(items) -> list[AdversaryGroup]:
    """The `ADVERSARIES_GROUP` of every test module among `items` (a session's collected tests)
    that has a test asking for `adversary_runs`: a file left out or deselected runs no trial."""
    groups: dict[str, AdversaryGroup] = {}
    for item in items:
        group = getattr(getattr(item, "module", None), "ADVERSARY_GROUP", None)
        if group is not None and "adversary_runs" in getattr(item, "fixturenames", ()):
            groups.setdefault(group.sweep_id, group)
    return list(groups.values())
