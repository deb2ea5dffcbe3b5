"""`reb-ray cluster status`'s Ray part: every alive node checks itself (reb_ray.node.health)
in a task pinned to it, and its line joins what Ray knows of it (address, CPUs, GPUs, the
`reb_ray_slot` resource cluster.yaml gives each node).

The tasks reserve no CPU, so a node whose CPUs all run trials still answers; a node that does
not answer within the timeout is reported as such, never as healthy.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import ray
from ray.exceptions import GetTimeoutError, RayError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from reb_ray.node.health import NodeHealth

SLOT_RESOURCE = "reb_ray_slot"  # cluster.yaml's per-node cap on concurrent sandboxes


@dataclass(frozen=True)
class NodeStatus:
    """One alive Ray node. `slots`: its `reb_ray_slot` resource (None: not declared, e.g. a
    plain local Ray). `health`: its own check, None when it gave none (then `error` says why)."""

    node_id: str
    address: str
    cpus: float
    gpus: int
    slots: int | None
    health: NodeHealth | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.health is not None and self.health.ok


@ray.remote(num_cpus=0)
def _check_here(image: str) -> NodeHealth:
    from reb_ray.node.health import check_node

    return check_node(image)


def connect(address: str) -> None:
    """Join the running cluster at `address` ("auto": the one on this machine). Raises
    ConnectionError when there is none; never starts a new Ray."""
    if ray.is_initialized():
        return
    from reb_ray.orchestrators.address import probe

    probe(address)  # RebRayError in seconds for a wrong HOST:PORT
    # Tasks import reb_ray from where this driver does (a source checkout, as on `ray up` nodes).
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False,
             runtime_env={"env_vars": {"PYTHONPATH": path}})


def cluster_status(image: str, timeout_s: float = 60.0) -> list[NodeStatus]:
    """Check every alive node of the connected cluster for sandboxes of `image`, all at once;
    sorted by address. Waits at most `timeout_s` seconds in all."""
    nodes = sorted((n for n in ray.nodes() if n.get("Alive")), key=lambda n: n["NodeManagerAddress"])
    refs = [_check_here.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote(image)
            for n in nodes]
    ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
    statuses = []
    for node, ref in zip(nodes, refs):
        resources = node.get("Resources", {})
        slots = resources.get(SLOT_RESOURCE)
        health, error = None, None
        try:
            health = ray.get(ref, timeout=0)
        except GetTimeoutError:
            error = f"no answer within {timeout_s:.0f} s"
            ray.cancel(ref, force=True)
        except RayError as exc:
            error = (str(exc).strip().splitlines() or [type(exc).__name__])[-1][:200]
        statuses.append(NodeStatus(node["NodeID"], node["NodeManagerAddress"], resources.get("CPU", 0.0),
                                   int(resources.get("GPU", 0)), None if slots is None else int(slots), health, error))
    return statuses
