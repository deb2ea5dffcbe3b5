"""Ctrl-C during a sweep: containers removed, finished rows kept, exit code 130.

The sweep runs one small task of its own (a one-file repository whose C1 is `echo`): what is
tested is the interrupt, not a task's stages, and it keeps no environment (a success's commit is
3-16 s on this machine and no part of the subject).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from reb_ray.results.read import read_trials
from reb_ray.sandbox.ownership import MANAGED, SWEEP
from reb_ray.testing.suite import write_task

REB_RAY = str(Path(sys.executable).with_name("reb-ray"))
ROOT = Path(__file__).resolve().parents[2]


def test_ctrl_c_keeps_finished_rows_and_removes_containers(tmp_path, docker_client, sandbox_image):
    out = tmp_path / "runs"
    write_task(tmp_path / "suites", "interrupt", "small", cpu='command = "echo cpu-ok"')
    driver = subprocess.Popen(
        [REB_RAY, "sweep", "--agents", "noop,tests.helpers.scripted_agents:SleepyAgent", "--suite", "interrupt",
         "--tasks-root", str(tmp_path / "suites"), "--keep-environments", "none",
         "--max-concurrent", "2", "--cpus-per-trial", "0.5", "--sweep-id", "ctrl-c", "--output", str(out), "--quiet"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    )
    labels = [f"{MANAGED}=true", f"{SWEEP}=ctrl-c"]
    try:
        deadline = time.monotonic() + 240
        while not (read_trials(out).num_rows == 1 and docker_client.containers.list(filters={"label": labels})):
            assert time.monotonic() < deadline and driver.poll() is None, "sweep never reached the state to interrupt"
            time.sleep(1)
        os.killpg(driver.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends: the whole foreground group
        _stdout, stderr = driver.communicate(timeout=120)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    assert driver.returncode == 130, stderr[-2000:]
    rows = read_trials(out).to_pylist()
    assert [(r["agent"], r["status"]) for r in rows] == [("noop", "scored")]
    assert docker_client.containers.list(all=True, filters={"label": labels}) == []
