"""GPU leases on Ray for sweeps that share GPUs in the agent phase.

Each GPU node used gets one `NodeGpuLease` actor pinned to it, holding all of the node's usable
GPUs in Ray's accounting (so Ray places nothing else on them) and no CPU. Agent phases run on
sharing slots (CPU slots of that node holding no GPU: slot_plan.plan_shared_slots); a trial's
probe phase asks the node's actor for its GPUs and holds them exclusively until it releases
them. The actor grants by the pure rule of reb_ray.trial.gpu_lease (oldest first, a reserved start
for the oldest, backfill only before it), so a 2-GPU probe phase is never starved and no other
work waits behind it: agent phases and CPU trials never ask for a lease.

A holder is one attempt; the actor checks every second that each holder's worker process (on its
own node) still runs, so a worker killed while holding a lease frees its GPUs. `RayGpuLease` is
what a trial gets (reb_ray.trial.gpu_lease.GpuLease): the actor's handle and the attempt's request.

The actor is infrastructure that heals: Ray restarts it on its node when its process dies
(`max_restarts`), and retries the calls it was serving (`max_task_retries`: acquire and release
are idempotent per holder). Its book is written to a file on its node after every change (one
per actor id, in the node's temporary directory) and read back on a restart, keeping only the
holders and waiting requests whose worker process (pid and start time) still runs: the probe
phases running on the node keep their GPUs, and no GPU is granted twice. A waiting request keeps
its place in the queue. A lease actor whose node died is not restarted (it is pinned there);
no trial asks it again, since a sharing slot whose node died is not started elsewhere
(slot_pool) and a retried attempt leases from the node it runs on.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from dataclasses import dataclass, field

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from reb_ray.errors import InfraError
from reb_ray.trial.gpu_lease import LeaseBook, _Request
from reb_ray.sandbox.ownership import process_start_ticks

WATCH_S = 1.0  # how often holders' worker processes are checked


@ray.remote(max_restarts=-1, max_task_retries=-1)
class NodeGpuLease:
    """The GPUs of one node, leased to probe phases; see the module docstring."""

    def __init__(self) -> None:
        self.book = LeaseBook([str(g) for g in ray.get_gpu_ids()])
        self.workers: dict[str, tuple[int, int | None]] = {}  # holder -> (pid, start ticks)
        self.granted: list[tuple[str, list[str], float]] = []  # (holder, ids, wall-clock grant time)
        self.restarts = 0
        self._cond: asyncio.Condition | None = None
        self._watcher: asyncio.Task | None = None
        self._path = os.path.join(tempfile.gettempdir(), f"reb-ray-lease-{ray.get_runtime_context().get_actor_id()}.json")
        self._restore()

    async def state(self) -> dict:
        """What the actor knows: {"held": {holder: ids}, "waiting": [holder, ...], "restarts": n}."""
        return {"held": {h: list(ids) for h, (ids, _end) in self.book.held.items()},
                "waiting": [r.holder for r in self.book.waiting], "restarts": self.restarts}

    async def close(self) -> None:
        """The sweep is over: remove the book's file (the actor is killed next)."""
        try:
            os.unlink(self._path)
        except OSError:
            pass

    async def ids(self) -> list[str]:
        """The node's GPU ids this actor holds (Ray's physical ids, as strings)."""
        return list(self.book.gpus)

    async def acquire(self, holder: str, count: int, expected_s: float, pid: int) -> list[str]:
        """Wait until `holder` holds `count` GPUs (capped to the node's); returns their ids.
        `pid`: the holder's worker process on this node; `expected_s`: seconds it will hold them."""
        cond = self._condition()
        async with cond:
            if holder not in self.workers:  # a retried call after a restart keeps the pid it had
                self.workers[holder] = (pid, process_start_ticks(pid))
            self.book.request(holder, count, expected_s)
            self._grant()
            await cond.wait_for(lambda: holder in self.book.held)
            return list(self.book.held[holder][0])

    async def release(self, holder: str) -> None:
        """`holder` is done (or gave up waiting): its GPUs go to the next requests."""
        cond = self._condition()
        async with cond:
            self.book.release(holder)
            self.workers.pop(holder, None)
            self._grant()

    async def history(self) -> list[tuple[str, list[str], float]]:
        """Every grant so far: (holder, GPU ids, time.time() when granted)."""
        return list(self.granted)

    def _condition(self) -> asyncio.Condition:
        if self._cond is None:  # made inside the actor's event loop
            self._cond = asyncio.Condition()
            self._watcher = asyncio.get_running_loop().create_task(self._watch())
        return self._cond

    def _grant(self) -> None:
        assert self._cond is not None
        for holder, ids in self.book.grant(time.monotonic()).items():
            self.granted.append((holder, ids, time.time()))
        self._save()
        self._cond.notify_all()

    def _save(self) -> None:
        """Write the book to its file (atomically: a crash mid-write leaves the previous one)."""
        book = self.book
        state = {"gpus": book.gpus, "held": {h: [ids, end] for h, (ids, end) in book.held.items()},
                 "waiting": [[r.holder, r.count, r.expected_s, r.seq] for r in book.waiting], "seq": book._seq,
                 "workers": self.workers, "granted": self.granted, "restarts": self.restarts}
        tmp = f"{self._path}.{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(state, f)
        os.replace(tmp, self._path)

    def _restore(self) -> None:
        """After a restart: the book as it was, less the holders whose worker process is gone."""
        try:
            with open(self._path) as f:
                state = json.load(f)
        except (OSError, ValueError):
            return  # a first start (or an unreadable file: nothing can be trusted, start empty)
        alive = {h for h, (pid, ticks) in state["workers"].items()
                 if (now := process_start_ticks(pid)) is not None and (ticks is None or now == ticks)}
        self.restarts = state.get("restarts", 0) + 1
        self.workers = {h: tuple(w) for h, w in state["workers"].items() if h in alive}
        self.granted = [tuple(g) for g in state.get("granted", [])]
        book = self.book
        book.held = {h: (list(ids), end) for h, (ids, end) in state["held"].items() if h in alive and set(ids) <= set(book.gpus)}
        taken = {g for ids, _ in book.held.values() for g in ids}
        book.free = [g for g in book.gpus if g not in taken]
        book.waiting = [_Request(h, count, expected_s, seq) for h, count, expected_s, seq in state["waiting"] if h in alive]
        book._seq = state.get("seq", 0)
        self._save()

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(WATCH_S)
            dead = [h for h, (pid, ticks) in self.workers.items()
                    if (now := process_start_ticks(pid)) is None or (ticks is not None and now != ticks)]
            if dead and self._cond is not None:
                async with self._cond:
                    for holder in dead:
                        self.book.release(holder)
                        self.workers.pop(holder, None)
                    self._grant()


def start_leases(nodes: dict[str, int], timeout_s: float) -> dict[str, tuple[ray.actor.ActorHandle, list[str]]]:
    """A lease actor on each node of `nodes` ({node_id: usable GPUs}); {node_id: (actor, GPU ids)}.
    Raises InfraError(infra_node) when one is not up within `timeout_s`."""
    actors = {node: NodeGpuLease.options(num_cpus=0, num_gpus=gpus, max_concurrency=1000,
                                         scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node, soft=False)
                                         ).remote() for node, gpus in nodes.items()}
    try:
        ids = ray.get([a.ids.remote() for a in actors.values()], timeout=timeout_s)
    except (ray.exceptions.RayError, ray.exceptions.GetTimeoutError) as exc:
        stop_leases({n: (a, []) for n, a in actors.items()})
        raise InfraError("infra_node", f"the GPU lease actors did not start: {exc}") from None
    return {node: (actor, gpu_ids) for (node, actor), gpu_ids in zip(actors.items(), ids)}


def stop_leases(leases: dict[str, tuple[ray.actor.ActorHandle, list[str]]]) -> None:
    """Kill the lease actors (the run is over)."""
    for actor, _ids in leases.values():
        try:
            ray.get(actor.close.remote(), timeout=5)
        except (ray.exceptions.RayError, ray.exceptions.GetTimeoutError):
            pass
        try:
            ray.kill(actor, no_restart=True)
        except ray.exceptions.RayError:
            pass


@dataclass
class RayGpuLease:
    """One attempt's lease of `count` GPUs on its node (reb_ray.trial.gpu_lease.GpuLease), shipped to
    its slot worker. `agent_gpus`: the node's GPUs its agent phase sees (as many as `count`)."""

    actor: ray.actor.ActorHandle
    agent_gpus: list[str]
    holder: str
    count: int
    expected_s: float
    _held: bool = field(default=False, repr=False)

    def acquire(self) -> list[str]:
        """Blocks until the GPUs are held. Raises InfraError(infra_node) when the actor is gone."""
        try:
            ids = ray.get(self.actor.acquire.remote(self.holder, self.count, self.expected_s, os.getpid()))
        except ray.exceptions.RayError as exc:
            raise InfraError("infra_node", f"the node's GPU lease is gone: {str(exc).splitlines()[0][:300]}") from None
        self._held = True
        return ids

    def release(self) -> None:
        """Give the GPUs back; a no-op when none are held or the actor is gone."""
        if not self._held:
            return
        self._held = False
        try:
            ray.get(self.actor.release.remote(self.holder), timeout=60)
        except (ray.exceptions.RayError, ray.exceptions.GetTimeoutError):
            pass  # a lost actor holds nothing any more
