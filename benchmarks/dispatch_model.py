"""An in-process model of a sweep's scheduling, driven by the product's own rules.

Virtual time, no Ray, no sandbox: the slots are the product's plan (`plan_slots`, or
`plan_shared_slots` with agent-phase GPU sharing), the order and placement of trials the
product's `Dispatcher`, and in a sharing sweep each node's probe-phase GPU lease the product's
`LeaseBook`, with the estimates the product would give them (the trial's history for dispatch,
the applicable stages' timeouts for a lease). Only the work is modelled: a trial holds its slot
for `agent_s + probe_s` seconds (slots only) or `agent_s`, then waits for its node's lease and
holds it `probe_s` seconds (sharing). Slot start-up and per-trial overhead are zero, so what the
model measures is what the rules alone cost: `makespan / lower bound` and who waits.
"""

from __future__ import annotations

import heapq
import itertools
import statistics
from dataclasses import dataclass, field

from reb_ray.trial.gpu_lease import LeaseBook
from reb_ray.scheduling.dispatch import Dispatcher, Job
from reb_ray.scheduling.slot_plan import NodeCapacity, plan_shared_slots, plan_slots


@dataclass
class Trial:
    """One trial: GPUs needed, seconds of agent and probe work, the history's estimate of both
    together, and the lease estimate (the probe stages' timeouts) a sharing sweep uses."""

    key: str
    gpus: int
    agent_s: float
    probe_s: float
    expected_s: float
    lease_expected_s: float


@dataclass
class Result:
    makespan: float
    lower_bound: float
    waits: dict[str, float]  # trial key -> seconds from the sweep's start to its start
    ran_on: dict[str, str]  # trial key -> node id
    # A sharing sweep's probe-phase leases: (node, asked at, granted at, released at, GPUs), seconds.
    leases: list[tuple[str, float, float, float, int]] = field(default_factory=list)


def lower_bound(trials: list[Trial], nodes: list[NodeCapacity], cpus_per_trial: float, share: bool) -> float:
    """max(GPU-seconds / GPUs, work / slots, longest trial): GPU-seconds are the whole trial's
    without sharing and the probe phases' with it; slots are the nodes' CPU room."""
    gpus = sum(n.gpus for n in nodes)
    held = [t.gpus * (t.probe_s if share else t.agent_s + t.probe_s) for t in trials]
    room = sum(int(n.cpus / cpus_per_trial + 1e-9) for n in nodes)
    work = [t.agent_s + t.probe_s for t in trials]
    return max(sum(held) / gpus, sum(work) / room, max(work))


def simulate(trials: list[Trial], nodes: list[NodeCapacity], cpus_per_trial: float, share: bool) -> Result:
    """Run `trials` on `nodes` by the product's rules in virtual time (module docstring)."""
    needs = [t.gpus for t in trials]
    plan = (plan_shared_slots if share else plan_slots)(nodes, cpus_per_trial, needs)
    dispatcher = Dispatcher()
    for i, shape in enumerate(plan):
        dispatcher.add_slot(i, shape.node_id, shape.gpu, shape.node_gpus)
    by_key = {t.key: t for t in trials}
    for t in trials:
        dispatcher.submit(_job(t, share))
    books = {n.node_id: LeaseBook([f"{n.node_id}:{g}" for g in range(n.gpus)]) for n in nodes if n.gpus}
    events: list[tuple[float, int, str, tuple]] = []
    seq = itertools.count()
    waits: dict[str, float] = {}
    ran_on: dict[str, str] = {}
    now = 0.0

    def start_all() -> None:
        for job, keys in dispatcher.assign(now):
            t = by_key[job.key]
            node = plan[keys[0]].node_id
            waits[t.key], ran_on[t.key] = now, node
            if share and t.gpus:
                heapq.heappush(events, (now + t.agent_s, next(seq), "lease", (t.key, keys, node)))
            else:
                heapq.heappush(events, (now + t.agent_s + t.probe_s, next(seq), "end", (t.key, keys, node)))

    def grant(node: str) -> None:
        for holder in books[node].grant(now):
            t = by_key[holder]
            granted[holder] = now
            heapq.heappush(events, (now + t.probe_s, next(seq), "probe_end", (holder, leased[holder], node)))

    leased: dict[str, list] = {}
    asked: dict[str, float] = {}
    granted: dict[str, float] = {}
    leases: list[tuple[str, float, float, float, int]] = []
    start_all()
    while events:
        now, _, kind, (key, keys, node) = heapq.heappop(events)
        if kind == "lease":
            t = by_key[key]
            leased[key] = keys
            asked[key] = now
            books[node].request(key, t.gpus, t.lease_expected_s)
            grant(node)
            continue
        if kind == "probe_end":
            leases.append((node, asked[key], granted[key], now, by_key[key].gpus))
            books[node].release(key)
            grant(node)
        dispatcher.finish(keys)
        start_all()
    return Result(now, lower_bound(trials, nodes, cpus_per_trial, share), waits, ran_on, leases)


def lease_idle(result: Result, nodes: list[NodeCapacity]) -> dict[str, float]:
    """A sharing sweep's idle GPU-seconds, by why the GPU was idle: `head` (before the node's first
    probe phase asked for a lease: the first agent phases), `waiting` (a probe phase waited for a
    lease while the GPU idled: the lease order keeping GPUs free for a multi-GPU probe), `unfed`
    (no probe phase waited: the agent phases did not keep up, and the tail once the last probe
    phases run). Their sum is GPUs x makespan - the probe phases' GPU-seconds."""
    out = {"head": 0.0, "waiting": 0.0, "unfed": 0.0}
    for node in nodes:
        mine = [lease for lease in result.leases if lease[0] == node.node_id]
        if not node.gpus:
            continue
        if not mine:
            out["unfed"] += node.gpus * result.makespan
            continue
        # +GPUs held / +asks pending at each moment; between moments the state is constant.
        events = sorted({0.0, result.makespan, *(t for lease in mine for t in lease[1:4])})
        first_ask = min(lease[1] for lease in mine)
        for lo, hi in zip(events, events[1:]):
            held = sum(g for _, _, start, end, g in mine if start <= lo < end)
            waiting = any(ask <= lo < start for _, ask, start, _, _ in mine)
            why = "head" if hi <= first_ask else "waiting" if waiting else "unfed"
            out[why] += (node.gpus - held) * (hi - lo)
    return out


def _job(t: Trial, share: bool) -> Job:
    if not share:
        return Job(t.key, t.gpus, t.expected_s)
    return Job(t.key, min(t.gpus, 1), t.expected_s, lease=t.gpus)


def summary(trials: list[Trial], result: Result) -> dict:
    """makespan / lower bound, the longest wait of a 2-GPU trial and the median trial's wait."""
    two = [result.waits[t.key] for t in trials if t.gpus == 2]
    return {"ratio": result.makespan / result.lower_bound, "makespan": result.makespan,
            "lower_bound": result.lower_bound, "two_gpu_max_wait": max(two, default=0.0),
            "median_wait": statistics.median(result.waits.values()),
            "one_max": max((result.waits[t.key] for t in trials if t.gpus == 1), default=0.0)}
