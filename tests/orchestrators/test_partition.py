"""A worker node cut off from the rest of the cluster mid-trial until the GCS gives it up, then restored.

A real partition on one machine (tests/helpers/net_partition.py): the node's raylet, and every
worker it forks, start inside a cgroup of their own, and iptables drops every packet of that
cgroup's sockets on `lo` while the cut holds. The node runs the sweep's one trial (Docker, an
agent that sleeps in its container the first time); a second node joins before the cut. The
GCS stops hearing the cut node, marks it dead, and the driver gets its slot worker's death. The
cluster's health checks are fast (reb_ray.testing.ray_cluster.FAST_HEALTH_CHECKS: dead after
about 9 s of silence, where Ray's defaults take about 65 s): what is tested is what follows the
verdict, and the cut holds until the GCS has given the node up (polled), never for a fixed time.

Expected: the cut attempt is an infra row, its container is removed (its owner still lives on
the cut node, so only the driver's removal of a dead attempt takes it), the retry runs on the
other node and is the trial's one scored row; after the cut heals nothing more is written
and no container of the sweep is left. Prints the seconds from the cut to each event.
"""

from __future__ import annotations

import os
import threading
import time
import uuid

import pytest

from reb_ray.models.sweep import SweepConfig
from reb_ray.results.read import read_trials
from reb_ray.testing.ray_cluster import FAST_HEALTH_CHECKS, ROOT, raylet_pid, ray_cluster
from tests.helpers import net_partition
from tests.orchestrators.test_faults import _our_containers, assert_exactly_once, join, run_in_thread, wait_for, write_suite

pytestmark = pytest.mark.integration

DEAD_WITHIN_S = 120.0  # the cut node must be given up by then (fast checks: about 9 s; Ray's defaults: about 65 s)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _workers(node) -> list[str]:
    """The process titles (`ray::...`, the first word) of `node`'s raylet's children: its workers,
    and its dashboard and runtime-env agents."""
    raylet, titles = raylet_pid(node), []
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                title = f.read().decode(errors="replace")
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        if int(stat[stat.rfind(")") + 2:].split()[1]) == raylet and title.startswith("ray::"):
            titles.append(title.split("\0")[0].split()[0])
    return titles


def _node_alive(node_id: str) -> bool:
    import ray

    return any(n["NodeID"] == node_id and n["Alive"] for n in ray.nodes())


@pytest.mark.docker
def test_a_worker_node_cut_off_mid_trial_until_given_up(tmp_path, docker_client, sandbox_image, monkeypatch):
    import ray

    why = net_partition.missing()
    if why is not None:
        pytest.skip(f"no partition can be made here: {why}")
    write_suite(tmp_path / "suites", 1)
    monkeypatch.setenv("SLEEP_ONCE_FLAG", str(tmp_path / "flag"))
    # Nodes added after the cluster's start inherit this process's environment: workers import this checkout.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    # Sleeps 300 s in its container the first time (longer than any cut: the container is removed
    # once the node is given up), and is noop on the retry.
    agent = "tests.helpers.scripted_agents:SleepOnceAgent"
    config = SweepConfig(output=tmp_path / "runs", suite="faults", tasks_root=tmp_path / "suites", agents=[agent],
                         sweep_id=f"partition-{uuid.uuid4().hex[:8]}", wheelhouses=[], pip_cache=False)
    trial_id = f"{agent}/f0/0"
    partition = net_partition.Partition()
    events: dict[str, float] = {}
    try:
        # The head has no CPU for a slot; the node to be cut is the only one at first, so the trial starts there.
        with ray_cluster({"num_cpus": 0}, connect=False, health_checks=FAST_HEALTH_CHECKS) as cluster:
            with partition.joined():
                cut_node = cluster.add_node(num_cpus=1)
                cluster.wait_for_nodes()
            assert raylet_pid(cut_node) in partition.pids()
            ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
            try:
                thread, box = run_in_thread(config)
                wait_for(lambda: (tmp_path / "flag").exists() and _our_containers(docker_client, config.resume.sweep_id), 180,
                         "the agent running in its container on the node to be cut")
                (container,) = _our_containers(docker_client, config.resume.sweep_id)
                other = cluster.add_node(num_cpus=1)  # where the retry can go
                cluster.wait_for_nodes()
                # The sweep's node poll (every 5 s) sees it and checks it: the check (a zero-CPU task,
                # reb_ray.orchestrators.node_check) is the first work Ray gives the new node, whose
                # raylet starts no worker before it; the check is over when its worker is idle.
                wait_for(lambda: (lambda titles: "ray::IDLE" in titles and "ray::_prepare_here" not in titles)(_workers(other)),
                         60, "the sweep's check of the second node")
                cut_at = time.time()
                partition.cut()
                watching = threading.Event()
                monitor = threading.Thread(target=_watch, daemon=True, args=(
                    events, cut_at, watching, thread, raylet_pid(cut_node), lambda: [c for c in _our_containers(docker_client, config.resume.sweep_id) if c.id == container.id]))
                monitor.start()
                wait_for(lambda: not _node_alive(cut_node.node_id), DEAD_WITHIN_S, "the GCS to give the cut node up")
                events["given_up"] = time.time() - cut_at
                # A partition, not a death: the node's processes outlive the cut.
                assert _alive(raylet_pid(cut_node)), "the cut node's raylet died during the cut"
                partition.heal()
                healed_at = time.time()
                events["healed"] = healed_at - cut_at
                result = join(thread, box, 240)
                wait_for(lambda: "raylet_exit" in events or time.time() - healed_at > 90, 120, "the monitor")
                watching.set()
                monitor.join(5)
                left = _our_containers(docker_client, config.resume.sweep_id)
                rows_after = read_trials(config.output.dir).to_pylist()
            finally:
                ray.shutdown()
    finally:
        partition.close()
        for leftover in _our_containers(docker_client, config.resume.sweep_id):
            leftover.remove(force=True)
    by_trial = assert_exactly_once(rows_after, [trial_id])
    assert left == [], f"containers left: {[c.name for c in left]}"
    assert container.id not in {c.id for c in docker_client.containers.list(all=True)}
    times = "; ".join(f"{k} {v:.2f} s" for k, v in sorted(events.items(), key=lambda kv: kv[1]))
    # Given up while cut: the cut attempt is an infra row, the retry on the other node the one scored row.
    dead, scored = by_trial[trial_id]
    assert dead["failure_category"] == "infra_node" and result.attempts == 2, dead
    seen = dead["finished_at"].timestamp() - cut_at
    retry = scored["started_at"].timestamp() - cut_at
    print(f"\npartition of a worker node until given up ({events['given_up']:.2f} s): the driver saw its attempt dead "
          f"{seen:.2f} s after the cut ({dead['failure_reason'][:160]}); retry started {retry:.2f} s; {times}; "
          "rows 2 (1 infra_node + 1 scored); containers left 0")


def _watch(events: dict[str, float], cut_at: float, done: threading.Event, sweep: threading.Thread, raylet: int,
           containers) -> None:
    """Record the seconds from the cut to: the sweep's end, the cut attempt's container's removal
    (`containers()`: it, while it exists), the cut node's raylet's exit."""
    while not done.is_set():
        now = time.time() - cut_at
        if "sweep_done" not in events and not sweep.is_alive():
            events["sweep_done"] = now
        if "container_gone" not in events and not containers():
            events["container_gone"] = now
        if "raylet_exit" not in events and not _alive(raylet):
            events["raylet_exit"] = now
        time.sleep(0.2)
