"""Running one call on the node that holds what it needs: a kept environment image lives in one
node's Docker, so re-probing it has to happen there (`reb-ray regrade --rerun-probes`), and an
environment's wheels in the package cache of the node that built it, so exporting and
rebuilding it too (`reb-ray sweep --verify-exports`).

`NodeRunner(address)` joins the running cluster (never starts one) and runs `fn(*args)` in a
Ray task pinned to the alive node whose hostname is `host` (Ray's `NodeManagerHostname`, the
`node` column of a trials row, which is `socket.gethostname()` where the attempt ran). The
task reserves no CPU, as `reb-ray cluster status`'s checks do: the call waits on a sandbox,
and a node whose CPUs all run trials still takes it. Its result and its exceptions come back
as they were raised (`ray.get`). Ray stays in this package: the caller hands the runner to
code that only sees a `run_on(host, fn, args)` callable.
"""

from __future__ import annotations

from typing import Any, Callable

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from reb_ray.errors import RebRayError


class NodeGone(RebRayError):
    """No alive node of the cluster has the hostname asked for."""


class NodeRunner:
    """See the module docstring. `hosts()` lists the alive nodes' hostnames."""

    def __init__(self, address: str) -> None:
        from reb_ray.orchestrators.cluster_status import connect

        connect(address)

    @staticmethod
    def hosts() -> list[str]:
        return sorted({n["NodeManagerHostname"] for n in ray.nodes() if n.get("Alive")})

    def __call__(self, host: str, fn: Callable[..., Any], args: tuple) -> Any:
        """`fn(*args)` on the alive node named `host`; raises NodeGone when there is none (the
        line names the hosts there are)."""
        ids = [n["NodeID"] for n in ray.nodes() if n.get("Alive") and n["NodeManagerHostname"] == host]
        if not ids:
            raise NodeGone(f"node {host} is not in the cluster (alive: {', '.join(self.hosts()) or 'none'})")
        task = ray.remote(num_cpus=0, max_retries=0)(fn)
        return ray.get(task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(ids[0], soft=False)).remote(*args))
