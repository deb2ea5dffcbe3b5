"""The environment tests' one kept heuristic success.

Capture, keep, export, `--verify-exports` and `regrade --rerun-probes` are all about the same
thing: the environment the heuristic agent built for numpy-trainer, kept as an image under the
`successes` policy. Each test file used to run that trial again (a minute of agent work each);
now it runs once per test process (`kept_heuristic`, under pytest-xdist once per worker), side
by side with a noop attempt under the same policy (whose success-less environment is committed,
then not kept), as a sweep runs two trials on this machine. Its output is read, never written: a
test that writes into an output (a re-probe, a verification, another row) works on its own copy
(`KeptRun.copy`). The kept image stays until the session ends, and no test removes it: a test
about a removed image removes one of its own.
"""

from __future__ import annotations

import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from reb_ray.models.sweep import SweepConfig, TrialSpec

#: The sweep id of the shared run's rows.
SWEEP = "envart"


def run_demo_trial(agent: str, config: SweepConfig, image: str, sweep_id: str = SWEEP) -> dict:
    """One trial of `agent` on the demo task numpy-trainer, its rows written to the config's
    output; returns its trials row."""
    from reb_ray.results.parquet_sink import ParquetSink
    from reb_ray.suite.load import load_suite
    from reb_ray.trial import run_trial

    task = next(t for t in load_suite("demo") if t.id == "numpy-trainer")
    outcome = run_trial(TrialSpec(sweep_id=sweep_id, agent=agent, task=task, trial_index=0, config=config, image=image))
    with ParquetSink(config.output.dir, flush_interval_s=0) as sink:
        sink.write([outcome.trial], outcome.stages)
    return outcome.trial


@dataclass
class KeptRun:
    """The shared output (`out`), the heuristic's and noop's rows in it."""

    out: Path
    heuristic: dict
    noop: dict

    def copy(self, to: Path) -> Path:
        """A copy of the output under `to`, for a test that writes into it."""
        shutil.copytree(self.out, to / self.out.name)
        return to / self.out.name


@pytest.fixture(scope="session")
def kept_heuristic(sandbox_image, docker_client, tmp_path_factory) -> KeptRun:
    """The heuristic's and noop's attempts on numpy-trainer under `successes`, run once (module
    docstring); the heuristic's kept image is removed at the session's end."""
    out = tmp_path_factory.mktemp("envart") / "out"
    config = SweepConfig(output=out, keep_environments="successes")
    with ThreadPoolExecutor(2) as pool:  # side by side, as a sweep runs two trials on this machine
        noop_run = pool.submit(run_demo_trial, "noop", config, sandbox_image)
        heuristic = run_demo_trial("heuristic", config, sandbox_image)
        noop = noop_run.result()
    yield KeptRun(out, heuristic, noop)
    if heuristic.get("env_image_id"):
        subprocess.run(["docker", "rmi", "-f", heuristic["env_image_id"]], capture_output=True)
