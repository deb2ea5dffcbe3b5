"""A real multi-raylet Ray cluster on this machine, for tests and benchmarks.

`ray_cluster(*nodes)` starts one raylet per entry of `nodes` (the first is the head, with the
GCS) through `ray.cluster_utils.Cluster`, the same processes `ray start` runs; each entry takes
`Cluster.add_node` arguments (`num_cpus`, `num_gpus`, `resources`, `env_vars`: a fake GPU's
id is the raylet's `CUDA_VISIBLE_DEVICES`). `env` is put in this process's environment while the
raylets start, so they and their workers (slot workers) inherit it, and restored afterwards;
PYTHONPATH always leads with this checkout, so workers import its reb_ray (not an installed one).
With `connect`, this process joins the cluster (`ray.init`) and leaves it at the end; without,
a driver in a subprocess can join at `cluster.address`.

`health_checks`: the GCS's checks of its raylets (`FAST_HEALTH_CHECKS` for tests whose subject is
a node's death or partition). Left out, Ray's own defaults hold, as on a user's cluster: a check
every 3 s, each given 10 s, dead after 5 failures in a row (a SIGKILLed raylet is seen dead about
15 s later, a silent one about 65 s later). A test of what happens after a node is declared dead
need not wait those out; a test of when Ray declares it would use the defaults.

`kill_raylet(node)` SIGKILLs a node's raylet (a node death) and reaps it, `kill_gcs(cluster)`
the head's GCS server, and
`actor_pids(cluster, title)` the pids of this cluster's worker processes whose title starts
with `title` (e.g. "ray::SlotWorker.run": a slot worker in a trial): only children of this
cluster's raylets, never those of another Ray running on the machine.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[2]

#: The GCS's checks of its raylets made fast: a check every second, each given 2 s, dead after 3
#: failures in a row (a refused check fails at once, so a SIGKILLed raylet is seen dead in about
#: 3 s; a silent, cut-off one in about 9 s). The 2 s answer time and the 3 failures in a row are
#: what keeps a raylet that is only slow on this loaded 2-core machine alive.
FAST_HEALTH_CHECKS = {"health_check_initial_delay_ms": 1000, "health_check_period_ms": 1000,
                      "health_check_timeout_ms": 2000, "health_check_failure_threshold": 3}


@contextmanager
def ray_cluster(*nodes: dict, env: dict[str, str] | None = None, connect: bool = True,
                health_checks: dict[str, int] | None = None, **init) -> Iterator:
    """The started cluster (a `ray.cluster_utils.Cluster`); see the module docstring. `init`:
    more `ray.init` arguments (e.g. `runtime_env`). Shuts the cluster down on exit."""
    import ray
    from ray.cluster_utils import Cluster

    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p), **(env or {})}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    cluster = None
    try:
        head, *workers = nodes or ({"num_cpus": 1},)
        system = {"_system_config": dict(health_checks)} if health_checks else {}
        cluster = Cluster(initialize_head=True, head_node_args={"include_dashboard": False, **system, **head})
        for node in workers:
            cluster.add_node(**node)
        cluster.wait_for_nodes()
        if connect:
            ray.init(address=cluster.address, log_to_driver=False, configure_logging=False, **init)
        yield cluster
    finally:
        if connect:
            ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def kill_raylet(node) -> None:
    """SIGKILL `node`'s raylet and reap it at once, as init reaps a `ray start` daemon: a dead
    raylet left a zombie (its parent here is this process) still reads as alive to its
    workers, which then never notice it died and go on running their trials."""
    import signal

    process = node.all_processes[_RAYLET()][0].process
    os.kill(process.pid, signal.SIGKILL)
    process.wait()


def kill_gcs(cluster) -> None:
    """SIGKILL the head's GCS server (the cluster's control store: without an external Redis,
    Ray 2.60 cannot bring it back) and reap it, as `kill_raylet` does for a raylet."""
    import signal

    from ray._private import ray_constants

    process = cluster.head_node.all_processes[ray_constants.PROCESS_TYPE_GCS_SERVER][0].process
    os.kill(process.pid, signal.SIGKILL)
    process.wait()


def _RAYLET() -> str:
    from ray._private import ray_constants

    return ray_constants.PROCESS_TYPE_RAYLET


def raylet_pid(node) -> int:
    """The pid of `node`'s raylet (a `ray._private.node.Node` from `cluster.add_node`)."""
    return node.all_processes[_RAYLET()][0].process.pid


def actor_pids(cluster, title: str) -> dict[int, object]:
    """{pid: its node} for this cluster's worker processes whose title starts with `title`."""
    raylets = {raylet_pid(node): node for node in [cluster.head_node, *cluster.worker_nodes] if node is not None}
    found = {}
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().decode(errors="replace")
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
        except OSError:
            continue
        ppid = int(stat[stat.rfind(")") + 2:].split()[1])
        if cmdline.startswith(title) and ppid in raylets:
            found[pid] = raylets[ppid]
    return found
