"""Runs that several test files read instead of each running the same trials again.

The demo sweep (the built-in `heuristic` and `noop` agents on the four demo tasks, real Docker,
real Ray, real pyright) is what tests/test_sweep.py proves end to end; its honest `heuristic`
trials and its `noop` trials are also the reference rows that other files compare their own
trials with (shortcuts, the witness's adversaries, the shared-GPU phase split, live re-grades,
the heuristic script in a sandbox). Those trials used to run again in each file, with the same
settings: now the sweep runs once per test process (`demo_sweep` in tests/conftest.py; under
pytest-xdist once per worker) and its output is read, never written: a test that changes an
output (a resume, a re-grade that writes) works on its own copy (`DemoSweep.copy`).
"""

from __future__ import annotations

import contextlib
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from reb_ray.models.sweep import SweepConfig

WHEELS = [Path("/opt/wheels")] if Path("/opt/wheels").is_dir() else []
DEMO_AGENTS = ("heuristic", "noop")
DEMO_TASKS = ("numpy-trainer", "import-name-mismatch", "pyproject-extra", "torch-tiny")


def unique_sweep_id() -> str:
    """A sweep id no other sweep on this machine uses (container labels are machine-wide)."""
    return f"test-{uuid.uuid4().hex[:8]}"


@contextlib.contextmanager
def ray_for_one_sweep():
    """The Ray a sweep started here runs on: the one this process has joined already (a module's
    `ray_local`), else a local Ray of its own with `ray_local`'s arguments, shut down as soon as
    the block ends, so that a module that starts its own Ray later finds none to collide with
    (its `ray.init` refuses a second one). A session-long Ray is what DECISIONS rules out: the
    orchestrator tests kill nodes and raylets, and a head kept across them was found lost."""
    import ray

    if ray.is_initialized():
        yield
        return
    ray.init(address="local", num_cpus=3, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield
    finally:
        ray.shutdown()


@dataclass
class DemoSweep:
    """The demo sweep's config, what `run_sweep` returned and its rows, read back once."""

    config: SweepConfig
    result: object  # reb_ray.sweep.run.SweepResult
    rows: dict[tuple[str, str], dict] = field(default_factory=dict)  # (agent, task) -> trials row
    stages: dict[tuple[str, str], dict[str, dict]] = field(default_factory=dict)  # (agent, task) -> {stage: row}

    @property
    def output(self) -> Path:
        return self.config.output.dir

    def row(self, agent: str, task: str) -> dict:
        return dict(self.rows[(agent, task)])

    def stages_of(self, agent: str, task: str) -> dict[str, dict]:
        return {name: dict(stage) for name, stage in self.stages[(agent, task)].items()}

    def copy(self, to: Path) -> SweepConfig:
        """The same config writing to a copy of the output at `to` (for a test that resumes or
        writes): the shared output stays as the sweep left it."""
        shutil.copytree(self.output, to / self.output.name)
        return self.config.updated(output={"dir": to / self.output.name})


def run_demo_sweep(base: Path) -> DemoSweep:
    """Run the demo sweep under `base` (module docstring) and read its rows."""
    from reb_ray.results.read import read_stages, read_trials
    from reb_ray.sweep.run import run_sweep

    # keep_environments none: no reader looks at a kept environment, and keeping costs a commit
    # per success (DECISIONS, "Keeping the full suite's time down").
    config = SweepConfig(sweep_id=unique_sweep_id(), output=base / "runs", wheelhouses=WHEELS, max_concurrent=2,
                         keep_environments="none")
    with ray_for_one_sweep():
        result = run_sweep(config, show_progress=False)
    shared = DemoSweep(config, result)
    for row in sorted(read_trials(shared.output).to_pylist(), key=lambda r: r["attempt"]):
        shared.rows[(row["agent"], row["task_id"])] = row  # each trial's latest attempt
    for stage in read_stages(shared.output).to_pylist():
        key = (stage["agent"], stage["task_id"])
        if stage["attempt"] == shared.rows[key]["attempt"]:
            shared.stages.setdefault(key, {})[stage["stage"]] = stage
    return shared
