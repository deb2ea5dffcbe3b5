"""F13: a driver killed with SIGKILL leaves containers; the next sweep removes only those."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from reb_ray.sandbox.ownership import MANAGED, SWEEP, Owner

REB_RAY = str(Path(sys.executable).with_name("reb-ray"))
ROOT = Path(__file__).resolve().parents[2]


def _sweep_containers(client, sweep_id: str) -> list:
    return client.containers.list(all=True, filters={"label": [f"{MANAGED}=true", f"{SWEEP}={sweep_id}"]})


def test_new_sweep_reaps_containers_of_a_sigkilled_driver(tmp_path, docker_client, sandbox_image):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    driver = subprocess.Popen(
        [REB_RAY, "sweep", "--agents", "tests.helpers.scripted_agents:SleepyAgent", "--tasks",
         "numpy-trainer,import-name-mismatch,pyproject-extra", "--max-concurrent", "3", "--cpus-per-trial", "0.5",
         "--sweep-id", "doomed-f13", "--output", str(tmp_path / "a"), "--quiet"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    foreign = docker_client.containers.run(sandbox_image, ["sleep", "infinity"], detach=True, labels={"someone.else": "1"})
    try:
        deadline = time.monotonic() + 240
        while len([c for c in _sweep_containers(docker_client, "doomed-f13") if c.status == "running"]) < 3:
            assert time.monotonic() < deadline, "three sandboxes never started"
            assert driver.poll() is None, "driver exited early"
            time.sleep(1)
        os.killpg(driver.pid, signal.SIGKILL)  # the driver and anything in its session
        driver.wait()
        orphans = _sweep_containers(docker_client, "doomed-f13")
        assert len(orphans) == 3
        # Ray kills the dead driver's actors; wait until their owner processes are gone.
        owners = [Owner.from_labels(c.labels) for c in orphans]
        deadline = time.monotonic() + 90
        while any(o.is_alive() for o in owners):
            assert time.monotonic() < deadline, "actor processes outlived their driver"
            time.sleep(1)
        res = subprocess.run(
            [REB_RAY, "sweep", "--agents", "noop", "--tasks", "numpy-trainer", "--sweep-id", "after-f13",
             "--output", str(tmp_path / "b"), "--quiet"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
        )
        assert res.returncode == 0, res.stderr[-2000:]
        assert _sweep_containers(docker_client, "doomed-f13") == []
        assert _sweep_containers(docker_client, "after-f13") == []
        foreign.reload()
        assert foreign.status == "running"
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
        foreign.remove(force=True)
        for container in _sweep_containers(docker_client, "doomed-f13"):
            container.remove(force=True)
