"""GPU-aware dispatch of trials onto slots: which trial starts next, and where.

Pure: no Ray, no clock of its own (the caller passes `now`, in seconds). A slot runs one trial
at a time; a GPU slot holds one GPU of its node, a CPU slot none. A trial needing k GPUs runs on
k GPU slots of one node (a gang: the first slot runs the trial with all k GPU ids, the others
are held for it until it ends). The rules:

- **Longest expected first** (LPT) within each GPU class (0, 1, 2, ... GPUs), and across
  classes for the GPU slots: the longest waiting trial that fits starts first, so the short
  ones are left for the end, where they fill the gaps.
- **No head-of-line blocking**: a trial that fits nowhere now never stops a smaller one from
  starting on a free slot.
- **No starvation of multi-GPU trials** (EASY backfilling): the longest multi-GPU trial that
  fits nowhere reserves the node where its k slots are expected to be free soonest. On that
  node a free slot may only take a trial expected to end before that moment, or one that still
  leaves k slots for it then; so the node drains for it and it starts when its slots are free.
  The reservation stays on its node until that trial starts (moving it would waste the slots
  already held idle there). With estimates that are too short the wait grows by the error,
  never without bound.
- **Best fit**: a trial takes the node with the fewest free slots that can hold it, keeping
  free pairs for the trials that need them.
- CPU trials run on CPU slots, and on free GPU slots only when no GPU trial waits.
- **Agent-phase GPU sharing** (a job's `lease` > 0): the job takes one sharing slot and leases
  `lease` GPUs of that slot's node for its probe phase, so it may only go to a node with at least
  that many GPUs (`add_slot(node_gpus=...)`). A free slot goes first to the waiting job that the
  fewest nodes can hold (the largest lease; longest expected within it), so the trials that
  only the larger nodes can run are not crowded off them by trials that could run anywhere
  (nothing idles for it: any waiting job fits in one slot). Among the nodes that can hold it,
  a job takes the one whose GPUs the running jobs lease least per GPU (their probe phases queue
  there), then the smallest node. The node's lease keeps its own reservation for multi-GPU
  probe phases (reb_ray.trial.gpu_lease).

`expected_s` is an estimate (earlier sweeps, else timeouts: reb_ray.scheduling.durations);
a trial running past it is treated as ending now.
"""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass, field
from typing import Hashable


@dataclass
class Job:
    """One trial attempt to place: `gpus` GPU slots of one node (0: a CPU slot), expected seconds;
    `lease`: GPUs of its node its probe phase leases (a sharing sweep's GPU trial; 0: none)."""

    key: Hashable
    gpus: int
    expected_s: float
    lease: int = 0
    seq: int = field(default=0, compare=False)  # submission order: ties keep it


@dataclass
class _Slot:
    key: Hashable
    node: str
    gpu: bool
    ends_at: float | None = None  # expected end of the trial holding it; None when free


@dataclass
class _Reservation:
    job: Job
    node: str


class Dispatcher:
    """Matches waiting jobs to free slots; see the module docstring for the rules.

    `max_running`: at most this many jobs run at once (None: as many as the slots hold).
    Usage: `add_slot` for each slot as it becomes ready, `submit` jobs, then after every event
    `assign(now)` (the jobs to start now, each with its slot keys, gang leader first) and
    `finish(keys)` when a job's slots are free again. Raises KeyError for an unknown slot key.
    """

    def __init__(self, max_running: int | None = None) -> None:
        self.max_running = max_running
        self._slots: dict[Hashable, _Slot] = {}
        self._free_gpu: dict[str, list[Hashable]] = {}  # node -> free GPU slot keys, in add order
        self._free_cpu: list[Hashable] = []
        self._node_gpus: dict[str, int] = {}  # node -> GPUs its lease holds (sharing slots' nodes)
        self._leased: dict[str, int] = {}  # node -> GPUs leased by the jobs running there
        self._leasing: dict[Hashable, tuple[str, int]] = {}  # a running leasing job's slot -> (node, lease)
        # (gpus, lease) -> ascending by expected
        self._queues: dict[tuple[int, int], list[tuple[float, int, Job]]] = {}
        self._running = 0
        self._seq = itertools.count()
        self._reservation: _Reservation | None = None

    # -- slots ---------------------------------------------------------------------------------
    def add_slot(self, key: Hashable, node: str, gpu: bool, node_gpus: int = 0) -> None:
        """A slot that is ready for work (free). `node_gpus`: for a sharing slot, the GPUs of its
        node that jobs on it may lease (0: a slot of a sweep without sharing)."""
        self._slots[key] = _Slot(key, node, gpu)
        if node_gpus:
            self._node_gpus[node] = node_gpus
        (self._free_gpu.setdefault(node, []) if gpu else self._free_cpu).append(key)

    def remove_slot(self, key: Hashable) -> None:
        """A slot that is gone (its actor died); a job on it must still be `finish`ed by the caller
        with its other slots, and re-`submit`ted if it is retried. A slot already gone (it left
        with the other slots of its worker) is ignored."""
        slot = self._slots.pop(key, None)
        if slot is None:
            return
        free = self._free_gpu.get(slot.node, []) if slot.gpu else self._free_cpu
        if key in free:
            free.remove(key)
        res = self._reservation
        if res is not None and res.node == slot.node and self.node_gpu_slots().get(slot.node, 0) < res.job.gpus:
            self._reservation = None  # its node can no longer hold it: the next pass reserves anew

    def node_gpu_slots(self) -> dict[str, int]:
        """GPU slots per node, busy ones included."""
        counts: dict[str, int] = {}
        for slot in self._slots.values():
            if slot.gpu:
                counts[slot.node] = counts.get(slot.node, 0) + 1
        return counts

    # -- jobs ----------------------------------------------------------------------------------
    def submit(self, job: Job) -> None:
        """Queue `job` at its place by expected seconds (retries too)."""
        job.seq = next(self._seq)
        # Among equal estimates, the earlier submission is taken first (it sorts last).
        bisect.insort(self._queues.setdefault((job.gpus, job.lease), []), (job.expected_s, -job.seq, job))

    @property
    def pending(self) -> int:
        """Jobs waiting for slots."""
        return sum(len(q) for q in self._queues.values())

    def pending_gpus(self) -> list[int]:
        """The GPUs each waiting job needs of one node (slots, or its lease; 0: a CPU job), to
        plan a joining node's slots."""
        return [max(k) for k, q in self._queues.items() for _ in q]

    @property
    def running(self) -> int:
        return self._running

    def take_pending(self) -> list[Job]:
        """Remove and return every waiting job, longest first (a spent budget launches none)."""
        jobs = sorted((j for q in self._queues.values() for _, _, j in q), key=lambda j: (-j.expected_s, j.seq))
        self._queues.clear()
        self._reservation = None
        return jobs

    def take_larger_than(self, gpus: int, lease: int | None = None) -> list[Job]:
        """Remove and return the waiting jobs needing more than `gpus` GPU slots of one node, or
        (when `lease` is given) leasing more than `lease` GPUs of one node: no node can run them
        any more (-1: no slot is left at all, so every job)."""
        def larger(k: tuple[int, int]) -> bool:
            return k[0] > gpus or (lease is not None and k[1] > max(lease, 0)) or gpus < 0
        jobs = [j for k, q in self._queues.items() if larger(k) for _, _, j in q]
        for k in [k for k in self._queues if larger(k)]:
            del self._queues[k]
        if self._reservation is not None and self._reservation.job.gpus > gpus:
            self._reservation = None
        return jobs

    def finish(self, keys: list[Hashable]) -> None:
        """The job on `keys` ended: those slots (the ones still known) are free again."""
        self._running -= 1
        node, lease = self._leasing.pop(keys[0], (None, 0)) if keys else (None, 0)
        if lease:
            self._leased[node] -= lease
        for key in keys:
            slot = self._slots.get(key)
            if slot is None:
                continue
            slot.ends_at = None
            (self._free_gpu.setdefault(slot.node, []) if slot.gpu else self._free_cpu).append(key)

    # -- the decision --------------------------------------------------------------------------
    def assign(self, now: float) -> list[tuple[Job, list[Hashable]]]:
        """The jobs to start now, each with its slots (leader first); they are marked busy."""
        starts = []
        while self.max_running is None or self._running < self.max_running:
            picked = self._next(now)
            if picked is None:
                break
            job, keys = picked
            self._start(job, keys, now)
            starts.append(picked)
        return starts

    def _start(self, job: Job, keys: list[Hashable], now: float) -> None:
        queue = self._queues[(job.gpus, job.lease)]
        if job.lease:
            node = self._slots[keys[0]].node
            self._leased[node] = self._leased.get(node, 0) + job.lease
            self._leasing[keys[0]] = (node, job.lease)
        del queue[bisect.bisect_left(queue, (job.expected_s, -job.seq))]
        for key in keys:
            slot = self._slots[key]
            slot.ends_at = now + job.expected_s
            (self._free_gpu[slot.node] if slot.gpu else self._free_cpu).remove(key)
        if self._reservation is not None and self._reservation.job is job:
            self._reservation = None
        self._running += 1

    def _next(self, now: float) -> tuple[Job, list[Hashable]] | None:
        heads = sorted((q[-1][2] for k, q in self._queues.items() if k[0] > 0 and q),
                       key=lambda j: (-j.lease, -j.expected_s, j.seq))
        for job in heads:
            keys = self._place(job, now)
            if keys is not None:
                return job, keys
            if job.gpus > 1 and self._reservation is None:
                self._reserve(job, now)
        for job in heads:  # backfill: a shorter job of the same class that ends before the reservation
            found = self._backfill(job.gpus, now)
            if found is not None:
                return found
        if self._queues.get((0, 0)):
            job = self._queues[(0, 0)][-1][2]
            if self._free_cpu:
                return job, [self._free_cpu[0]]
            if not heads:  # no GPU trial waits: a free GPU slot may run a CPU trial
                node = self._best_node(1, now, job)
                if node is not None:
                    return job, [self._free_gpu[node][0]]
        return None

    def _place(self, job: Job, now: float) -> list[Hashable] | None:
        node = self._best_node(job.gpus, now, job)
        return None if node is None else self._free_gpu[node][:job.gpus]

    def _best_node(self, k: int, now: float, job: Job) -> str | None:
        """The node with the fewest free GPU slots >= k where `job` may start now; for a job
        that leases GPUs, among the nodes with that many, the least leased per GPU first."""
        best, best_rank = None, None
        for node, free in self._free_gpu.items():
            if len(free) < k or not self._allowed(node, k, job, now):
                continue
            if job.lease:
                gpus = self._node_gpus.get(node, 0)
                if gpus < job.lease:
                    continue
                rank = (self._leased.get(node, 0) / gpus, gpus, len(free))
            else:
                rank = (len(free),)
            if best_rank is None or rank < best_rank:
                best, best_rank = node, rank
        return best

    def _allowed(self, node: str, k: int, job: Job, now: float) -> bool:
        """Whether `job` (k slots, expected to end at now + expected_s) may start on `node`
        without delaying the reservation held there."""
        res = self._reservation
        if res is None or res.node != node or res.job is job:
            return True
        at = self._free_time(node, res.job.gpus, now)
        if now + job.expected_s <= at:
            return True  # back before the reserved job needs the slots
        free_then = sum(1 for s in self._slots.values() if s.node == node and s.gpu and (s.ends_at is None or s.ends_at <= at))
        return free_then - k >= res.job.gpus

    def _backfill(self, k: int, now: float) -> tuple[Job, list[Hashable]] | None:
        """The longest waiting k-GPU job that may start on the reserved node now, if any."""
        res = self._reservation
        if res is None or len(self._free_gpu.get(res.node, [])) < k:
            return None
        queue = self._queues.get((k, 0))
        if not queue:
            return None
        gap = self._free_time(res.node, res.job.gpus, now) - now
        i = bisect.bisect_right(queue, (gap, 1))  # jobs with expected_s <= gap lie before i
        for expected_s, _neg_seq, job in reversed(queue[:i]):
            if job is not res.job:
                return job, self._free_gpu[res.node][:k]
        return None

    def _reserve(self, job: Job, now: float) -> None:
        """Reserve for `job` the node where `job.gpus` slots are expected free soonest."""
        counts = self.node_gpu_slots()
        nodes = [n for n, c in counts.items() if c >= job.gpus]
        if nodes:
            node = min(nodes, key=lambda n: (self._free_time(n, job.gpus, now), -len(self._free_gpu.get(n, []))))
            self._reservation = _Reservation(job, node)

    def _free_time(self, node: str, k: int, now: float) -> float:
        """When k GPU slots of `node` are expected free (a trial past its estimate: now)."""
        ends = sorted(now if s.ends_at is None else max(s.ends_at, now)
                      for s in self._slots.values() if s.node == node and s.gpu)
        return ends[k - 1] if len(ends) >= k else float("inf")
