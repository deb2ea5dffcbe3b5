"""Nodes an autoscaler may still start, and asking it for them.

`ray up` writes the cluster's configuration on the head as ~/ray_bootstrap_config.yaml (the
autoscaler's `--autoscaling-config`, cluster-aws.yaml's head start command; Ray Tune reads the
same file to tell an autoscaling cluster). The driver runs on the head (`reb-ray sweep
--address auto`), so it reads the node types there: every type with `max_workers` > 0 whose
`resources` declare CPUs (the AWS provider fills CPU, GPU and memory in from the instance type
before writing the file) may still join. A type without declared CPUs (the on-premises `local`
provider, whose nodes all start at `ray up`) is not counted: its shape is unknown.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from reb_ray.orchestrators.cluster_status import SLOT_RESOURCE
from reb_ray.scheduling.slot_plan import NodeCapacity

BOOTSTRAP_CONFIG = Path("~/ray_bootstrap_config.yaml")


def joinable_node_types(path: Path = BOOTSTRAP_CONFIG) -> list[NodeCapacity]:
    """One NodeCapacity per node type the autoscaler may still start (node id `type:<name>`);
    [] without the file or with one that does not parse (no autoscaler known)."""
    try:
        config = yaml.safe_load(path.expanduser().read_text()) or {}
    except (OSError, yaml.YAMLError):
        return []
    types = config.get("available_node_types") if isinstance(config, dict) else None
    shapes = []
    for name, spec in (types or {}).items():
        if not isinstance(spec, dict):
            continue
        resources = spec.get("resources") or {}
        if int(spec.get("max_workers", config.get("max_workers", 0)) or 0) <= 0 or "CPU" not in resources:
            continue
        memory = resources.get("memory")
        slots = resources.get(SLOT_RESOURCE)
        shapes.append(NodeCapacity(f"type:{name}", float(resources["CPU"]), int(resources.get("GPU", 0)),
                                   slot_cap=None if slots is None else int(slots),
                                   memory_bytes=None if memory is None else int(memory)))
    return shapes


def request_gpu_nodes(bundles: list[dict]) -> None:
    """Ask the autoscaler for nodes that hold `bundles` ([{"CPU": c, "GPU": g}, ...]; [] clears
    the request). Slot workers are pinned to nodes that exist, so without this request nothing
    would ever make the autoscaler start a GPU worker."""
    from ray.autoscaler.sdk import request_resources

    request_resources(bundles=bundles)
