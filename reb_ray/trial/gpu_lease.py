"""Per-node GPU leases for the probe phase when agent phases share the node's GPUs.

With `--share-gpus-in-agent-phase` a trial's agent phase holds no GPU: it runs on a CPU slot of
a GPU node and sees some of the node's GPUs without holding them (docs/DECISIONS.md,
"Agent-phase GPU sharing"). Its probe phase then leases GPUs of that same node exclusively, from
the node's `LeaseBook`. No Ray here: the book is pure (the caller passes `now`, in seconds), and
the Ray actor that holds a node's GPUs around it is `NodeGpuLease`, with the orchestrators.

The book's rule is EASY backfilling on one node: requests are served oldest first; when the
oldest does not fit (a 2-GPU probe while one GPU is leased), it is promised the moment its GPUs
are expected free, and a younger request may take a free GPU now only if it is expected to give
it back before that moment. So a 2-GPU probe phase is never starved by a stream of 1-GPU ones,
and a free GPU is not left idle when a short probe fits before it is needed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


class GpuLease(Protocol):
    """One attempt's way to its node's GPUs (what `run_trial` is given in a sharing sweep).

    `agent_gpus`: physical ids of the node's GPUs the agent phase sees, held by nobody for it
    (as many as the trial's probe phase will get, so the agent sees what its probes will see).
    `acquire()` blocks until the probe phase holds GPUs of the node exclusively and returns
    their physical ids; `release()` gives them back (idempotent; also safe before acquire).
    """

    agent_gpus: list[str]

    def acquire(self) -> list[str]: ...

    def release(self) -> None: ...


@dataclass
class StaticLease:
    """A lease with nobody to share with: `acquire` returns `gpus` at once. For one trial run
    outside a cluster (tests, a single sandbox), where exclusivity is trivially true."""

    agent_gpus: list[str]
    gpus: list[str]
    acquired: int = 0
    released: int = 0

    def acquire(self) -> list[str]:
        self.acquired += 1
        return list(self.gpus)

    def release(self) -> None:
        self.released += 1


@dataclass
class _Request:
    holder: str
    count: int
    expected_s: float
    seq: int


@dataclass
class LeaseBook:
    """The GPUs of one node and who holds them. `gpus`: the node's physical ids.

    `request(holder, count, expected_s)` queues a request (count is capped to the node's GPUs);
    `grant(now)` returns the {holder: ids} granted by this call; `release(holder)` frees a
    holder's GPUs or drops its waiting request. Holders are any hashable names (an attempt).
    """

    gpus: list[str]
    free: list[str] = field(default_factory=list)
    held: dict[str, tuple[list[str], float]] = field(default_factory=dict)  # holder -> (ids, expected end)
    waiting: list[_Request] = field(default_factory=list)
    _seq: int = 0

    def __post_init__(self) -> None:
        self.free = list(self.gpus)

    def request(self, holder: str, count: int, expected_s: float) -> None:
        """Queue `holder`'s request for `count` GPUs held about `expected_s` seconds."""
        if holder in self.held or any(r.holder == holder for r in self.waiting):
            return
        self._seq += 1
        self.waiting.append(_Request(holder, max(1, min(count, len(self.gpus))), expected_s, self._seq))

    def release(self, holder: str) -> None:
        """Free `holder`'s GPUs (in the node's order) or drop its request; unknown: nothing."""
        ids, _ = self.held.pop(holder, ([], 0.0))
        self.free = [g for g in self.gpus if g in self.free or g in ids]
        self.waiting = [r for r in self.waiting if r.holder != holder]

    def grant(self, now: float) -> dict[str, list[str]]:
        """Grant every request the rule allows now (module docstring); returns them."""
        granted: dict[str, list[str]] = {}
        while self.waiting:
            first = self.waiting[0]
            if first.count <= len(self.free):
                granted[first.holder] = self._give(first, now)
                continue
            promised = self._free_at(first.count, now)
            fit = next((r for r in self.waiting[1:] if r.count <= len(self.free) and now + r.expected_s <= promised), None)
            if fit is None:
                break
            granted[fit.holder] = self._give(fit, now)
        return granted

    def _give(self, req: _Request, now: float) -> list[str]:
        ids, self.free = self.free[:req.count], self.free[req.count:]
        self.held[req.holder] = (ids, now + req.expected_s)
        self.waiting.remove(req)
        return ids

    def _free_at(self, count: int, now: float) -> float:
        """When `count` GPUs are expected free: the free ones now, the held ones at their
        expected end (a lease past its estimate counts as ending now)."""
        ends = sorted([now] * len(self.free) + [max(end, now) for ids, end in self.held.values() for _ in ids])
        return ends[count - 1]
