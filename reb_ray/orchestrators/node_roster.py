"""The cluster's nodes as one run sees them, from the start of the run and as nodes join.

`NodeRoster` holds what the orchestrator knows about nodes: which passed their check
(`NodeChecks`), their capacity (CPUs, GPUs, `reb_ray_slot` cap, memory),
which GPU nodes' Docker gives containers no GPUs (node_tasks.docker_gpu_problems), the slots to
start on them (slot_plan), and, in a GPU-sharing sweep, each GPU node's lease actor
(`NodeGpuLease`). The dispatch loop stays in `RayOrchestrator`.
"""

from __future__ import annotations

import time
from itertools import count
from typing import Callable

import ray

from reb_ray.errors import RebRayError
from reb_ray.models.sweep import TrialSpec
from reb_ray.scheduling.durations import probe_timeout_estimate
from reb_ray.orchestrators.lease_actor import RayGpuLease, start_leases, stop_leases
from reb_ray.orchestrators.node_check import NodeChecks, NodeRequirements, NodeVerdict, alive_nodes, check_all
from reb_ray.orchestrators.node_tasks import docker_gpu_problems
from reb_ray.scheduling.slot_plan import NodeCapacity, SlotShape, plan_shared_slots, plan_slots
from reb_ray.orchestrators.slot_pool import Slot


class NoUsableNode(RebRayError):
    """No node of the cluster passed its check: the sweep stops before any trial, so no row is written on a cluster
    that cannot run one."""


class NodeRoster:
    """Nodes, their checks, their slots and their GPU leases for one run.

    `docker_image`: the docker sandbox's image (None: no per-node GPU check). `on_node_line(line)`
    gets one line per node that fails its check. `share_gpus`: slots hold no GPU and the probe
    phases of GPU trials lease their node's GPUs (`lease`). After `check_at_start`, `verdicts`
    holds every node's check and `check_s` the seconds the start-up checks took (the sweep's
    start-up profile); `no_gpu_nodes` maps node id -> why its Docker gives containers no GPUs.
    """

    def __init__(self, requirements: NodeRequirements, docker_image: str | None, cpus_per_trial: float,
                 max_concurrent: int | None, on_node_line: Callable[[str], None], share_gpus: bool,
                 lease_timeout_s: float) -> None:
        self.requirements, self.docker_image = requirements, docker_image
        self.cpus_per_trial, self.max_concurrent = cpus_per_trial, max_concurrent
        self.on_node_line, self.share_gpus, self.lease_timeout_s = on_node_line, share_gpus, lease_timeout_s
        self.no_gpu_nodes: dict[str, str] = {}
        self.verdicts: list[NodeVerdict] = []
        self.check_s: float | None = None
        self._leases: dict[str, tuple[ray.actor.ActorHandle, list[str]]] = {}  # node_id -> lease actor, GPU ids
        self._lease_turn = count()  # rotates the GPUs each agent phase is shown over the node's

    def check_at_start(self, checks: NodeChecks) -> list[NodeCapacity]:
        """Check every alive node; the capacity of those that passed. Raises NoUsableNode (one
        line naming the first failure) when none passed."""
        start = time.monotonic()
        passed, failed = check_all(checks, alive_nodes())
        self.check_s = time.monotonic() - start
        for verdict in failed:
            self._failed(verdict)
        if not passed:
            first = failed[0].line() if failed else "the cluster has no alive node"
            raise NoUsableNode(f"no node of the cluster passed its check ({len(failed)} failed; {first})")
        self._passed(passed)
        return [self._capacity(v) for v in passed]

    def plan(self, nodes: list[NodeCapacity], needs: list[int]) -> list[SlotShape]:
        """The slots to start on `nodes` for trials needing `needs` GPUs each (slot_plan), with
        the lease actor of every node they share GPUs on started."""
        plan = plan_shared_slots if self.share_gpus else plan_slots
        shapes = plan(nodes, self.cpus_per_trial, needs, self.max_concurrent)
        sharing = {s.node_id for s in shapes if s.shares_gpus} - set(self._leases)
        if sharing:
            self._leases.update(start_leases({n.node_id: n.gpus for n in nodes if n.node_id in sharing},
                                             self.lease_timeout_s))
        return shapes

    def joined(self, verdict: NodeVerdict, pending_gpus: list[int]) -> list[SlotShape]:
        """A node checked during the sweep: the slots to start on it for the trials still waiting
        (`pending_gpus`, each capped), none when it failed its check (then named in one line)."""
        if not verdict.ok:
            self._failed(verdict)
            return []
        self._passed([verdict])
        return self.plan([self._capacity(verdict)], pending_gpus) if pending_gpus else []

    def lease(self, spec: TrialSpec, slot: Slot) -> RayGpuLease | None:
        """The lease of a GPU trial on a sharing slot (None for a CPU trial there): as many GPUs as
        it needs of its node, capped to the node's; its agent phase sees that many of them."""
        actor, ids = self._leases[slot.shape.node_id]
        need = min(spec.task.gpus_needed, len(ids))
        if need == 0:
            return None
        turn = next(self._lease_turn) % len(ids)
        shown = (ids[turn:] + ids[:turn])[:need]
        return RayGpuLease(actor, shown, f"{spec.trial_id}#{spec.attempt}", need, probe_timeout_estimate(spec))

    def stop_leases(self) -> None:
        stop_leases(self._leases)

    def _capacity(self, verdict: NodeVerdict) -> NodeCapacity:
        memory = verdict.health.memory_bytes if verdict.health is not None else None
        return NodeCapacity(verdict.node_id, verdict.cpus, verdict.gpus, verdict.node_id not in self.no_gpu_nodes,
                            verdict.slot_cap, memory)

    def _failed(self, verdict: NodeVerdict) -> None:
        self.verdicts.append(verdict)
        self.on_node_line(verdict.line())

    def _passed(self, passed: list[NodeVerdict]) -> None:
        """Record passing nodes' checks, and which GPU nodes' Docker gives containers no GPUs."""
        self.verdicts.extend(passed)
        if self.docker_image and any(v.gpus for v in passed):
            gpu_nodes = {v.node_id for v in passed if v.gpus}
            self.no_gpu_nodes.update(docker_gpu_problems(self.docker_image, nodes=gpu_nodes))
