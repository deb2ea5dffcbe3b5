"""A trial's LLM meter: requests, tokens, cost, failures and a bounded request log.

Written by the proxy's event loop, read by harness threads (`snapshot`, `log`): every access
holds one lock. Nothing here ever sees a key: the proxy hands over paths, statuses and usage.
"""

from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass, field

from reb_ray.llm.failures import AUTH, CATEGORIES
from reb_ray.llm.prices import PriceTable, cost_usd
from reb_ray.llm.usage import FIELDS, Usage

LOG_SIZE = 2000  # request-log entries kept per trial (the oldest are dropped and counted)


@dataclass(frozen=True)
class TrialLimits:
    """Per-trial limits the proxy enforces.

    `max_cost_usd`: once the trial's metered cost reaches it, the proxy answers every further
    request itself with HTTP 402 "budget exceeded" (requests already in flight finish, so the
    final cost can pass it by one response). `max_concurrency`: the upstream endpoint's limit
    on requests in flight, shared by every trial using that upstream (a semaphore per
    upstream; the first registration sets it).
    """

    max_cost_usd: float | None = None
    max_concurrency: int | None = None


@dataclass
class RequestRecord:
    """One request as the proxy saw it; times in seconds, `started_at` epoch seconds.

    `status` is None when no HTTP answer came (connection refused, timeout before headers,
    client gone); `refused` is true when the proxy answered itself (over budget, or after the
    trial's key was refused once).
    """

    started_at: float
    method: str
    path: str
    api: str | None
    model: str | None
    stream: bool
    status: int | None = None
    duration_s: float = 0.0
    ttfb_s: float | None = None
    wait_s: float = 0.0
    response_bytes: int = 0
    usage: Usage | None = None
    category: str | None = None
    error: str | None = None
    retry_after_s: float | None = None
    refused: bool = False
    client_disconnected: bool = False
    injected_stream_usage: bool = False
    cost_usd: float | None = field(default=None)

    def as_dict(self) -> dict:
        entry = {k: v for k, v in self.__dict__.items() if k != "usage"}
        entry["usage"] = None if self.usage is None else self.usage.as_dict()
        return entry


class TrialMeter:
    """Counts for one trial; `snapshot()` gives the dict `ProxyServer.meter` returns."""

    def __init__(self, trial_id: str, upstream: str, model: str | None, limits: TrialLimits,
                 prices: PriceTable, log_size: int = LOG_SIZE) -> None:
        self.trial_id, self.upstream, self.model, self.limits = trial_id, upstream, model, limits
        self._prices = prices
        self._lock = threading.Lock()
        self._requests = self._upstream_requests = self._ok = self._no_usage = 0
        self._budget_refusals = 0
        self._status: collections.Counter = collections.Counter()
        self._failures: collections.Counter = collections.Counter()
        self._models: collections.Counter = collections.Counter()
        self._usage = Usage()
        self._cost: float | None = 0.0
        self._cost_limit_reached = False
        self._last_error: dict | None = None
        self._log: collections.deque = collections.deque(maxlen=log_size)
        self._log_dropped = 0
        self._in_flight = 0
        self._auth_failure: str | None = None  # the first refused key of a model request: "HTTP 401: message"

    @property
    def auth_failure(self) -> str | None:
        """Why the trial's key was refused ("HTTP 401: message"), once a model request was
        refused for authentication (`infra_llm_auth`); None before. The key will not start
        working within the attempt, so the proxy answers the trial's later requests itself and
        the trial ends its agent phase (reb_ray.trial.llm)."""
        with self._lock:
            return self._auth_failure

    def begin(self) -> bool:
        """Counts a new request; False when the trial is over its cost limit (refuse it)."""
        with self._lock:
            self._requests += 1
            if self._cost_limit_reached:
                self._budget_refusals += 1
                return False
            self._in_flight += 1
            self._upstream_requests += 1
            return True

    def refuse(self, rec: RequestRecord) -> None:
        """Counts and records a request the proxy answered itself without `begin` (an earlier
        authentication failure): a request, never an upstream request."""
        with self._lock:
            self._requests += 1
        self.record(rec)

    def record(self, rec: RequestRecord) -> None:
        """Adds a finished request (forwarded or refused) to the counts and the log."""
        with self._lock:
            if not rec.refused:
                self._in_flight -= 1
            if rec.status is not None:
                self._status[str(rec.status)] += 1
            if rec.category is not None:
                self._failures[rec.category] += 1
                if rec.category == AUTH and rec.api is not None and self._auth_failure is None:
                    status = f"HTTP {rec.status}" if rec.status is not None else "no answer"
                    self._auth_failure = f"{status}: {rec.error or '?'}"[:300]
                self._last_error = {"category": rec.category, "status": rec.status, "message": rec.error,
                                    "retry_after_s": rec.retry_after_s, "at": rec.started_at, "path": rec.path}
            if rec.status is not None and 200 <= rec.status < 300:
                self._ok += 1
                self._account(rec)
            if len(self._log) == self._log.maxlen:
                self._log_dropped += 1
            self._log.append(rec.as_dict())

    def _account(self, rec: RequestRecord) -> None:
        if rec.api is None:  # /v1/models, count_tokens: no generation, nothing to count
            return
        if rec.model:
            self._models[rec.model] += 1
        if rec.usage is None or rec.usage.empty:
            self._no_usage += 1
            self._cost = None  # tokens were spent that nobody counted
            return
        self._usage = self._usage + rec.usage
        cost, _ = cost_usd(rec.model or self.model, rec.usage, table=self._prices)
        rec.cost_usd = cost
        self._cost = None if cost is None or self._cost is None else self._cost + cost
        limit = self.limits.max_cost_usd
        if limit is not None and self._cost is not None and self._cost >= limit:
            self._cost_limit_reached = True

    def snapshot(self) -> dict:
        """The meter as a JSON-able dict. A token field is the sum over the responses that
        reported it; None when requests went out but no response reported it (unknown), 0 when
        no request ever went out (nothing can have been billed)."""
        with self._lock:
            usage = Usage(0, 0, 0, 0, 0) if self._upstream_requests == 0 else self._usage
            return {
                "trial_id": self.trial_id, "upstream": self.upstream, "model": self.model,
                "requests": self._requests, "upstream_requests": self._upstream_requests,
                "in_flight": self._in_flight, "responses_ok": self._ok,
                "responses_without_usage": self._no_usage, "status_counts": dict(self._status),
                **{f: getattr(usage, f) for f in FIELDS},
                "cost_usd": self._cost, "cost_source": "price_table" if self._cost is not None else "unknown",
                "price_version": self._prices.version, "max_cost_usd": self.limits.max_cost_usd,
                "cost_limit_reached": self._cost_limit_reached, "budget_refusals": self._budget_refusals,
                "failures": {c: self._failures.get(c, 0) for c in CATEGORIES},
                "last_error": dict(self._last_error) if self._last_error else None,
                "auth_failure": self._auth_failure,
                "models": dict(self._models), "log_entries": len(self._log), "log_dropped": self._log_dropped,
                "snapshot_at": time.time(),
            }

    def log(self) -> list[dict]:
        """The request log, oldest first (at most `log_size` entries; see `log_dropped`)."""
        with self._lock:
            return [dict(e) for e in self._log]
