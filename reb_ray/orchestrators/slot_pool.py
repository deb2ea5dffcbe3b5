"""Long-lived slot workers on Ray: one actor per sandbox slot (or per few), many trials each.

Starting a Ray actor costs about a second and Ray starts only a few at a time per node, so a
sweep starts its slots once (`plan_slots`) and sends each trial to a free
one. A `SlotWorker` is pinned to its node (hard node affinity) and holds its slot's resources
(`cpus_per_trial` CPUs, plus one GPU for a GPU slot, plus one `reb_ray_slot` on a node that
declares that cap), so Ray's accounting matches what runs;
its `where()` answer (node, pid, GPU id) marks it ready.

`slots_per_worker`: how many slots of one node share a worker process (each slot's trials run
in a thread of it; the worker holds the sum of their resources and gives each GPU slot one of
its GPUs). One by default: a worker that dies then takes one attempt with it. A worker process
costs about 0.5 CPU-seconds to start (Python, Ray, reb-ray's imports), so where many slots share
few cores (a cluster simulated on one machine, or nodes whose trials get a fraction of a CPU),
fewer processes fill the slots sooner; the slots of one worker live and die together (a dead
worker's attempts are all retried, its idle slots leave the dispatcher with it).

A slot whose actor died is replaced by
a new actor of the same shape on the same node while the node lives, and on whichever node Ray
finds room for it when the node died (node loss retries the attempt on another node; the
slot takes the node it lands on), except a sharing slot: its trials lease the GPUs of its node,
so with its node gone it is not started elsewhere (the retried attempt goes to a sharing slot of
a live node with the GPUs it needs, and leases there); one that fails to start `MAX_START_FAILURES` times in a
row, or is not up within `start_timeout_s`, is dropped.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time
from collections import deque
from dataclasses import dataclass, field
from itertools import count

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from reb_ray.trial.gpu_lease import GpuLease
from reb_ray.trial.llm import ProxyClient
from reb_ray.models.sweep import TrialSpec
from reb_ray.orchestrators.cluster_status import SLOT_RESOURCE
from reb_ray.scheduling.slot_plan import SlotShape, start_order
from reb_ray.trial.record import TrialOutcome
from reb_ray.trial.run import run_trial

MAX_START_FAILURES = 3


@ray.remote(max_restarts=0)
class SlotWorker:
    """Runs trials one after another in this worker process, on this slot's resources."""

    def where(self, gpu_index: int | None = None, alone: bool = True) -> dict:
        """node_id (Ray's), node (host name), pid, gpu_ids (Ray's, as strings: [] for a CPU slot),
        cpu_s (CPU seconds this worker process used to get here: its start-up's cost). `alone`:
        the worker's only slot (its GPUs are the slot's); else `gpu_index` says which of the
        worker's GPUs is this slot's (None: a CPU slot)."""
        gpus = [str(g) for g in ray.get_gpu_ids()]
        if not alone:
            gpus = gpus[gpu_index:gpu_index + 1] if gpu_index is not None else []
        return {"node_id": ray.get_runtime_context().get_node_id(), "node": socket.gethostname(), "pid": os.getpid(),
                "gpu_ids": gpus, "cpu_s": time.process_time()}

    def run(self, spec: TrialSpec, gpus: list[str], no_gpus_reason: str | None,
            llm_proxy: ProxyClient | None = None, gpu_lease: GpuLease | None = None) -> TrialOutcome:
        """One attempt (reb_ray.trial.run_trial) with the physical GPU ids `gpus` the driver gave it
        (this slot's, plus its gang's for a multi-GPU trial; [] for a CPU trial), or, on a sharing
        slot, the `gpu_lease` its probe phase takes its node's GPUs from. A Harbor task's
        attempt runs the Harbor way (reb_ray.harbor.sweep), with the same GPUs."""
        if spec.task.harbor is not None:
            from reb_ray.harbor.sweep import run_harbor_attempt

            return run_harbor_attempt(spec, gpus, no_gpus_reason, ship_artifacts=True, llm_proxy=llm_proxy)
        return run_trial(spec, gpus, no_gpus_reason, llm_proxy=llm_proxy, ship_artifacts=True,  # no shared filesystem assumed
                         gpu_lease=gpu_lease)


@dataclass
class Slot:
    """One slot's worker: its shape, actor, and `where` answer once it is up (None while starting).
    `worker` numbers the actor: slots with the same number share its process."""

    key: int
    shape: SlotShape
    actor: ray.actor.ActorHandle
    ready_ref: ray.ObjectRef
    created: float  # monotonic seconds
    where: dict | None = None
    failures: int = 0
    pinned: bool = True  # held to shape.node_id; False: a dead node's replacement, anywhere
    worker: int = 0

    @property
    def gpu_ids(self) -> list[str]:
        return list(self.where["gpu_ids"]) if self.where else []


@dataclass
class SlotPool:
    """The sweep's slot workers. `created` counts every actor created (replacements included).

    `start_concurrency`: at most this many workers starting at once (None: all at once; a cluster
    simulated on one small machine starts faster in small waves, since its raylets share cores).
    `slots_per_worker`: slots of one node in one worker process (None: all of a node's slots
    started together; see the module docstring).
    `up_s`: for each slot up so far, seconds from `start()` until its worker answered, and
    `up_cpu_s` the CPU seconds each worker process used until it was up, once per process (the
    slot start-up profile a benchmark prints); `created` counts slots, `workers_created` processes.
    """

    shapes: list[SlotShape]
    cpus_per_trial: float
    start_concurrency: int | None = None
    start_timeout_s: float = 600.0
    slots_per_worker: int | None = 1
    slots: dict[int, Slot] = field(default_factory=dict)
    created: int = 0
    workers_created: int = 0
    up_s: list[float] = field(default_factory=list)
    up_cpu_s: list[float] = field(default_factory=list)
    _started: float | None = None
    _keys: count = field(default_factory=count)
    _counted: set = field(default_factory=set)  # workers whose start-up CPU is in up_cpu_s
    _waiting: deque = field(default_factory=deque)  # (shape, failures, pinned) not started yet

    def start(self) -> None:
        """Queue every planned slot (`start_order`: GPU slots first, one node after another in turn)
        and start as many as `start_concurrency` allows."""
        self._started = time.monotonic()
        self._waiting.extend((shape, 0, True) for shape in start_order(self.shapes))
        self._start_more()

    def starting_refs(self) -> list[ray.ObjectRef]:
        """The `where` refs of slots still starting (ready when their actor is up)."""
        return [s.ready_ref for s in self.slots.values() if s.where is None]

    @property
    def alive(self) -> int:
        """Slots up or on their way (queued ones included)."""
        return len(self.slots) + len(self._waiting)

    def most_gpu_slots(self) -> int:
        """The most GPU slots any node has, starting and queued ones included: the largest GPU
        need that can still run; 0 with only CPU slots, -1 with no slot at all."""
        if not self.alive:
            return -1
        per_node: dict[str, int] = {}
        for shape in [s.shape for s in self.slots.values()] + [shape for shape, _, _ in self._waiting]:
            per_node[shape.node_id] = per_node.get(shape.node_id, 0) + shape.gpu
        return max(per_node.values())

    def most_lease_gpus(self) -> int:
        """The most GPUs any node with a sharing slot (up, starting or queued) can lease: the
        largest lease that can still run; 0 with no sharing slot."""
        shapes = [s.shape for s in self.slots.values()] + [shape for shape, _, _ in self._waiting]
        return max((s.node_gpus for s in shapes if s.shares_gpus), default=0)

    def on_ready(self, ref: ray.ObjectRef) -> Slot | None:
        """Resolve a starting slot's `where` ref: the slot when up, None when it failed (it is
        started again, or dropped after MAX_START_FAILURES)."""
        slot = next((s for s in self.slots.values() if s.ready_ref == ref), None)
        if slot is None:  # its worker failed to start for another of its slots: dropped with it
            return None
        try:
            slot.where = ray.get(ref)
        except ray.exceptions.RayError:
            self._drop(slot.key, again=slot.failures + 1 < MAX_START_FAILURES, failures=slot.failures + 1)
            return None
        self.up_s.append(time.monotonic() - (self._started or slot.created))
        if slot.worker not in self._counted:
            self._counted.add(slot.worker)
            self.up_cpu_s.append(slot.where.get("cpu_s", 0.0))
        if slot.where["node_id"] != slot.shape.node_id:  # an unpinned replacement: where Ray put it
            slot.shape = dataclasses.replace(slot.shape, node_id=slot.where["node_id"])
        self._start_more()
        return slot

    def add(self, shapes: list[SlotShape]) -> None:
        """Start more slots (a node that joined the cluster during the sweep)."""
        self._waiting.extend((shape, 0, True) for shape in start_order(shapes))
        self._start_more()

    def replace(self, key: int) -> list[int]:
        """The actor of slot `key` died: start a new one of the same shape if its node lives, and
        so for the other slots of that worker. Returns the keys of the slots that left (none when
        `key` had already left with a sibling)."""
        if key not in self.slots:
            return []
        return self._drop(key, again=True, failures=0)

    def expire(self, now: float) -> list[int]:
        """Drop slots not up within start_timeout_s; returns their keys."""
        late = [s.key for s in self.slots.values() if s.where is None and now - s.created > self.start_timeout_s]
        for key in late:
            if key in self.slots:  # else: it left with a sibling of its worker
                self._drop(key, again=False, failures=MAX_START_FAILURES)
        return late

    def kill_all(self) -> None:
        """Kill every slot's actor (the run is over or interrupted)."""
        for slot in {s.worker: s for s in self.slots.values()}.values():
            ray.kill(slot.actor, no_restart=True)
        self.slots.clear()
        self._waiting.clear()

    def _drop(self, key: int, *, again: bool, failures: int) -> list[int]:
        """Slot `key` and the other slots of its worker leave (the worker is killed); with
        `again`, each is queued to start anew. Returns their keys."""
        worker = self.slots[key].worker
        gone = [self.slots.pop(k) for k in [k for k, s in self.slots.items() if s.worker == worker]]
        try:
            ray.kill(gone[0].actor, no_restart=True)
        except ray.exceptions.RayError:
            pass
        alive = again and _node_alive(gone[0].shape.node_id)
        for slot in gone:
            if again and (alive or not slot.shape.shares_gpus):
                self._waiting.append((slot.shape, failures, slot.pinned and alive))
        self._start_more()
        return [slot.key for slot in gone]

    def _starting_workers(self) -> int:
        return len({s.worker for s in self.slots.values() if s.where is None})

    def _start_more(self) -> None:
        while self._waiting and (self.start_concurrency is None or self._starting_workers() < self.start_concurrency):
            group = [self._waiting.popleft()]
            first_shape, _, pinned = group[0]
            # Queued slots pinned to the same node (same failure count) join this worker, GPU slots first; a
            # replacement placed anywhere starts alone (Ray need not find room for a group).
            for entry in list(self._waiting):
                if self.slots_per_worker is not None and len(group) >= self.slots_per_worker:
                    break
                if pinned and entry[0].node_id == first_shape.node_id and entry[2] and entry[1] == group[0][1]:
                    self._waiting.remove(entry)
                    group.append(entry)
            group.sort(key=lambda e: not (e[0].gpu and not e[0].shares_gpus))
            gpu_held = sum(1 for shape, _, _ in group if shape.gpu and not shape.shares_gpus)
            capped = sum(1 for shape, _, _ in group if shape.capped)
            where = NodeAffinitySchedulingStrategy(node_id=first_shape.node_id, soft=False) if pinned else "DEFAULT"
            actor = SlotWorker.options(num_cpus=self.cpus_per_trial * len(group), num_gpus=gpu_held,
                                       resources={SLOT_RESOURCE: capped} if capped else None,
                                       max_concurrency=len(group) + 1 if len(group) > 1 else 1,
                                       scheduling_strategy=where).remote()
            worker = self.workers_created  # the worker's number: how many were created before it
            self.workers_created += 1
            for i, (shape, failures, _) in enumerate(group):
                key = next(self._keys)
                where_ref = actor.where.remote(i if i < gpu_held else None, len(group) == 1)
                self.slots[key] = Slot(key, shape, actor, where_ref, time.monotonic(),
                                       failures=failures, pinned=pinned, worker=worker)
                self.created += 1


def _node_alive(node_id: str) -> bool:
    return any(n["NodeID"] == node_id and n.get("Alive") for n in ray.nodes())
