"""Issue 9 item 8: a trial actor that dies mid-trial has its container removed on its node at
once, before the retry's container is created, and its infra row says category, start and node.

Real Ray, real Docker: the test SIGKILLs the actor's worker process (its pid is the owner pid
the actor itself wrote on its container) while the agent sleeps inside the container. The task
is a small one of the test's own (a one-file repository whose C1 is `echo`): the subject is the
dead attempt's container, not a task's stages.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
import uuid

import pytest

from reb_ray.models.sweep import SweepConfig
from reb_ray.results.read import read_trials
from reb_ray.sandbox.ownership import ATTEMPT, MANAGED, OWNER_PID, SWEEP
from reb_ray.testing.suite import write_task


@pytest.fixture
def ray_local():
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


def _kill_actor_when_agent_sleeps(docker_client, sweep_id: str, seen: dict) -> None:
    """Wait for attempt 1's container with the agent's `sleep 300` running, then SIGKILL its owner."""
    labels = [f"{MANAGED}=true", f"{SWEEP}={sweep_id}", f"{ATTEMPT}=1"]
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        for container in docker_client.containers.list(filters={"label": labels}):
            try:
                procs = container.top()["Processes"]
            except Exception:  # noqa: BLE001 - the container may be starting or going
                continue
            if any("sleep 300" in " ".join(p) for p in procs):
                seen["container"] = container.id
                seen["pid"] = int(container.labels[OWNER_PID])
                os.kill(seen["pid"], signal.SIGKILL)
                return
        time.sleep(0.5)


def test_dead_actor_container_is_removed_before_the_retry(tmp_path, docker_client, sandbox_image, ray_local, monkeypatch):
    from reb_ray.sweep.run import run_sweep

    monkeypatch.setenv("SLEEP_ONCE_FLAG", str(tmp_path / "flag"))
    sweep_id = f"test-dead-{uuid.uuid4().hex[:8]}"
    write_task(tmp_path / "suites", "dead", "small", cpu='command = "echo cpu-ok"')
    config = SweepConfig(sweep_id=sweep_id, output=tmp_path / "runs", agents=["tests.helpers.scripted_agents:SleepOnceAgent"],
                         suite="dead", tasks_root=tmp_path / "suites", wheelhouses=[], pip_cache=False)
    since = int(time.time()) - 1
    seen: dict = {}
    killer = threading.Thread(target=_kill_actor_when_agent_sleeps, args=(docker_client, sweep_id, seen), daemon=True)
    killer.start()
    try:
        result = run_sweep(config, show_progress=False)
    finally:
        killer.join(5)
        for container in docker_client.containers.list(all=True, filters={"label": [f"{SWEEP}={sweep_id}"]}):
            container.remove(force=True)
    assert seen.get("pid"), "the agent never ran in a container"
    assert seen["pid"] != os.getpid()  # the actor's worker, not this driver

    rows = sorted(read_trials(config.output.dir).to_pylist(), key=lambda r: r["attempt"])
    assert [(r["attempt"], r["status"]) for r in rows] == [(1, "infra_error"), (2, "scored")] and result.attempts == 2
    dead = rows[0]
    assert (dead["failure_owner"], dead["failure_category"], dead["node"]) == ("infra", "infra_node", socket.gethostname())
    assert dead["started_at"] is not None and dead["finished_at"] >= dead["started_at"]
    assert f"removed its container {seen['container'][:12]}" in dead["failure_reason"]

    # The daemon's own event log: the dead attempt's container was destroyed before the retry's was created.
    events = [e for e in docker_client.events(since=since, until=int(time.time()) + 1, decode=True,
                                              filters={"type": "container", "label": f"{SWEEP}={sweep_id}"})]
    order = [(e["Action"], e["Actor"]["Attributes"].get(ATTEMPT), e["Actor"]["ID"]) for e in events
             if e["Action"] in ("create", "destroy")]
    destroyed = order.index(("destroy", "1", seen["container"]))
    retry_created = next(i for i, (action, attempt, _id) in enumerate(order) if action == "create" and attempt == "2")
    assert destroyed < retry_created, order
