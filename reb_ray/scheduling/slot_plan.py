"""Which sandbox slots each node gets. Pure: nodes in, slot shapes out.

A slot is one long-lived worker running one trial at a time with `cpus_per_trial` CPUs: a GPU
slot also holds one GPU of its node, a CPU slot none. A k-GPU trial runs on k GPU slots of one
node (`Dispatcher`), so the shapes never have to match the trial mix.

Per node: CPU room = floor(CPUs / cpus_per_trial), at most its `reb_ray_slot` resource when it
declares one (cluster.yaml's per-node cap on concurrent sandboxes; each slot worker then holds
one, so Ray's accounting enforces it too; a node without it is uncapped); GPU slots = min(GPUs, CPU room) when its
Docker can give containers GPUs (else none: its trials would run without them); the CPU room
left is CPU slots. Only slots the sweep can use are made: GPU slots on whole nodes, largest
nodes first, until the trials' GPUs (capped) are covered; CPU slots, spread over the nodes, up to
the CPU trials; both kinds at most what `max_concurrent` trials can use at once. A trial needing
more GPUs than any node's GPU slots is capped to the largest such node (its stages that need
more are then `insufficient_hardware`); with no slot at all (`--cpus-per-trial 8` on 2-CPU
nodes), `plan_slots` returns none and the caller records every trial at once rather than leave
Ray a request it would keep pending for ever.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NodeCapacity:
    """A Ray node: its id, CPUs and GPUs (Ray's resources), whether its Docker gives GPUs, its
    `reb_ray_slot` cap (None: none declared) and physical memory in bytes (None: unknown)."""

    node_id: str
    cpus: float
    gpus: int
    gpus_usable: bool = True
    slot_cap: int | None = None
    memory_bytes: int | None = None


@dataclass(frozen=True)
class SlotShape:
    """One slot to start: on `node_id`, holding one GPU or none; `index` numbers it on its node;
    `capped`: its node declares `reb_ray_slot`, so the slot's worker holds one.

    `shares_gpus` (a GPU-sharing sweep, `plan_shared_slots`): a slot for GPU trials that holds no
    GPU itself (`gpu` is true for dispatch); its trials lease the node's GPUs for their probes,
    `node_gpus` of them (the node's usable GPUs: a trial needing more cannot run on it)."""

    node_id: str
    gpu: bool
    index: int
    capped: bool = False
    shares_gpus: bool = False
    node_gpus: int = 0


def cpu_room(node: NodeCapacity, cpus_per_trial: float) -> int:
    """How many trials of `cpus_per_trial` CPUs fit on `node` (a tolerance for 0.1 + 0.2 sums)."""
    room = int(node.cpus / cpus_per_trial + 1e-9)
    return room if node.slot_cap is None else min(room, node.slot_cap)


def gpu_slots_possible(node: NodeCapacity, cpus_per_trial: float) -> int:
    """GPU slots `node` can hold: one per usable GPU while CPUs last."""
    return min(node.gpus, cpu_room(node, cpus_per_trial)) if node.gpus_usable else 0


def gpu_cap(nodes: list[NodeCapacity], cpus_per_trial: float) -> int:
    """The most GPUs one trial can get: the most GPU slots any node can hold (0: none)."""
    return max((gpu_slots_possible(n, cpus_per_trial) for n in nodes), default=0)


def plan_slots(nodes: list[NodeCapacity], cpus_per_trial: float, gpu_needs: list[int],
               max_concurrent: int | None = None) -> list[SlotShape]:
    """The slots to start for trials needing `gpu_needs` GPUs each (already capped by `gpu_cap`).

    GPU slots: whole nodes, most GPU slots first, until the summed needs (and at most
    `max_concurrent` x the largest need) are covered. CPU slots: round-robin over the nodes'
    CPU room left, at most the number of 0-GPU trials and `max_concurrent`. Empty when no node
    can hold a single trial.
    """
    gpu_trials = [n for n in gpu_needs if n > 0]
    cpu_trials = len(gpu_needs) - len(gpu_trials)
    limit = max_concurrent if max_concurrent is not None else len(gpu_needs)
    gpu_wanted = min(sum(gpu_trials), limit * max(gpu_trials, default=0))
    shapes: list[SlotShape] = []
    used: dict[str, int] = {}
    for node in sorted(nodes, key=lambda n: (-gpu_slots_possible(n, cpus_per_trial), n.node_id)):
        count = gpu_slots_possible(node, cpus_per_trial)
        if gpu_wanted <= 0 or count == 0:
            break
        shapes.extend(SlotShape(node.node_id, True, i, node.slot_cap is not None) for i in range(count))
        used[node.node_id] = count
        gpu_wanted -= count
    room = {n.node_id: cpu_room(n, cpus_per_trial) - used.get(n.node_id, 0) for n in nodes}
    cpu_wanted = min(cpu_trials, limit)
    while cpu_wanted > 0 and any(r > 0 for r in room.values()):
        for node in nodes:
            if cpu_wanted > 0 and room[node.node_id] > 0:
                shapes.append(SlotShape(node.node_id, False, used.get(node.node_id, 0), node.slot_cap is not None))
                used[node.node_id] = used.get(node.node_id, 0) + 1
                room[node.node_id] -= 1
                cpu_wanted -= 1
    return shapes


def start_order(shapes: list[SlotShape]) -> list[SlotShape]:
    """The order to ask for `shapes`' workers: GPU (and sharing) slots before CPU slots, and within
    each kind one slot per node in turn (each node's own order kept).

    Each node starts only a few worker processes at once (Ray: one per CPU) and holds a few
    started ahead; asking node by node would queue a whole node's slots behind its own start-up
    while the other nodes idle. In turn, every node starts its first slots at once, and the
    GPU slots, which run the scarce work, are all up before any CPU slot is asked for."""
    def by_node(kind: list[SlotShape]) -> list[SlotShape]:
        queues: dict[str, list[SlotShape]] = {}
        for shape in kind:
            queues.setdefault(shape.node_id, []).append(shape)
        out = []
        for turn in range(max((len(q) for q in queues.values()), default=0)):
            out.extend(q[turn] for q in queues.values() if turn < len(q))
        return out

    return by_node([s for s in shapes if s.gpu]) + by_node([s for s in shapes if not s.gpu])


def hardware_refusal(nodes: list[NodeCapacity], cpus_per_trial: float, memory_bytes: int | None) -> str | None:
    """Why no trial of the sweep can ever run, in one line, or None.

    `nodes`: every node that is or may become part of the cluster (alive nodes that passed
    their check, and node types an autoscaler may still start). The CPUs and the sandbox memory
    (`memory_bytes`, --memory-gb; None: the node's own default) are the same for every trial of
    a sweep, so either the largest node holds one or none ever will. A node of unknown memory
    may hold any. GPUs are never refused here: a trial needing more than any node has is capped
    to the largest node and its GPU stages are `insufficient_hardware`, so the other stages of
    that trial are still measured.
    """
    if not any(cpu_room(n, cpus_per_trial) for n in nodes):
        largest = max((n.cpus for n in nodes), default=0.0)
        if any(int(n.cpus / cpus_per_trial + 1e-9) for n in nodes):
            return "no node of the cluster can hold a sandbox slot (reb_ray_slot is 0 on every node)"
        return (f"needs {cpus_per_trial:g} CPU(s) per trial (--cpus-per-trial); the largest of the cluster's "
                f"{len(nodes)} node(s) has {largest:g}")
    holding = [n for n in nodes if cpu_room(n, cpus_per_trial)]
    if memory_bytes is not None and all(n.memory_bytes is not None and n.memory_bytes < memory_bytes for n in holding):
        largest = max(n.memory_bytes for n in holding)
        return (f"needs {memory_bytes / 1024**3:g} GiB of memory per sandbox (--memory-gb); the largest node that "
                f"can hold a slot has {largest / 1024**3:.1f} GiB")
    return None


def plan_shared_slots(nodes: list[NodeCapacity], cpus_per_trial: float, gpu_needs: list[int],
                      max_concurrent: int | None = None) -> list[SlotShape]:
    """The slots of a GPU-sharing sweep: no slot holds a GPU; a node's GPUs are leased to probe
    phases (`NodeGpuLease`).

    Sharing slots (`shares_gpus`, one per CPU room, round-robin) go on every node with usable
    GPUs that covers the smallest need in `gpu_needs` (already capped to the largest such node),
    up to the GPU trials and `max_concurrent`; CPU slots take the CPU room left, as in
    `plan_slots`. Each sharing slot says how many GPUs its node can lease (`node_gpus`), and the
    dispatcher sends a GPU trial only to a slot whose node has all it needs; so on a cluster of
    unequal GPU nodes a 1-GPU box runs 1-GPU trials while the 2-GPU ones go to the larger boxes.
    """
    gpu_trials = sum(1 for n in gpu_needs if n > 0)
    smallest = min((n for n in gpu_needs if n > 0), default=0)
    limit = max_concurrent if max_concurrent is not None else len(gpu_needs)
    room = {n.node_id: cpu_room(n, cpus_per_trial) for n in nodes}
    used: dict[str, int] = {}
    shapes: list[SlotShape] = []

    def spread(on: list[NodeCapacity], wanted: int, sharing: bool) -> None:
        while wanted > 0 and any(room[n.node_id] > 0 for n in on):
            for node in on:
                if wanted > 0 and room[node.node_id] > 0:
                    shapes.append(SlotShape(node.node_id, sharing, used.get(node.node_id, 0), node.slot_cap is not None,
                                             shares_gpus=sharing, node_gpus=node.gpus if sharing else 0))
                    used[node.node_id] = used.get(node.node_id, 0) + 1
                    room[node.node_id] -= 1
                    wanted -= 1

    if gpu_trials:
        spread([n for n in nodes if n.gpus_usable and n.gpus >= smallest], min(gpu_trials, limit), True)
    spread(nodes, min(len(gpu_needs) - gpu_trials, limit), False)
    return shapes
