"""Ray's own text stays out of the user's terminal: a real `reb-ray sweep` whose agent kills its
Ray worker once (local sandbox, the bundled demo suite), run as the user runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RAY_TEXT = ("Token authentication is", "Started a local Ray instance", "(raylet)", "A worker died", "RAY_AUTH_MODE")


@pytest.mark.integration
def test_ray_banners_and_worker_deaths_go_to_the_sweep_log_not_the_terminal(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_AUTH_MODE", "RAY_ADDRESS")}  # Ray's own default
    env.update(DIE_ONCE_FLAG=str(tmp_path / "flag"), PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])))
    out = tmp_path / "runs"
    done = subprocess.run([sys.executable, "-c", "from reb_ray.cli import main; main()", "sweep", "--sandbox", "local",
                           "--agents", "tests.helpers.scripted_agents:DieOnceAgent", "--unsafe-local", "--tasks", "numpy-trainer",
                           "--no-pip-cache", "--quiet", "--output", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "2 attempt(s) run" in done.stdout and "1 infra error(s)" in done.stdout  # the worker did die, once
    terminal = done.stdout + done.stderr
    assert [text for text in RAY_TEXT if text in terminal] == []
    logs = list((out / ".reb-ray" / "logs").glob("*.log"))
    assert len(logs) == 1
    log = logs[0].read_text()
    assert "Token authentication is" in log  # Ray says one of enabled / disabled when it starts
    died = [line for line in log.splitlines() if "(raylet) A worker died" in line]
    assert len(died) == 1 and "Worker exit type" in died[0]
