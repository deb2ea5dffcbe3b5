"""The proxy's trials: stand-in key -> trial (upstream, key variable, meter), and each
upstream's concurrency. Thread-safe: harness threads register while the proxy's loop looks up.

The real keys are looked up by variable name in the proxy's key table (`keys`: the dict of
keys the driver handed the node's proxy, or os.environ for a proxy inside the harness process).
"""

from __future__ import annotations

import os
import secrets
import threading
from dataclasses import dataclass
from typing import Mapping

from reb_ray.errors import RebRayError
from reb_ray.llm.meter import TrialLimits, TrialMeter
from reb_ray.llm.prices import PriceTable

STAND_IN_PREFIX = "sk-rebray-"


@dataclass(frozen=True)
class Trial:
    """A registered trial. `real_key_env` names the variable holding the real key; the key
    itself is read from the proxy's key table when a request goes out and is never kept here."""

    trial_id: str
    key: str
    upstream: str
    real_key_env: str | None
    meter: TrialMeter


def key_of(headers) -> str:
    """The API key a request carries: `x-api-key`, else an `Authorization: Bearer` token, else ""."""
    key = headers.get("x-api-key") or ""
    auth = headers.get("authorization") or ""
    if not key and auth[:7].lower() == "bearer ":
        key = auth[7:].strip()
    return key


class TrialRegistry:
    """Registered trials and the concurrency of each upstream they use."""

    def __init__(self, prices: PriceTable, log_size: int, keys: Mapping[str, str] | None = None) -> None:
        self.prices, self.log_size = prices, log_size
        self.keys: Mapping[str, str] = os.environ if keys is None else keys
        self._lock = threading.Lock()
        self._by_key: dict[str, Trial] = {}
        self._by_id: dict[str, Trial] = {}
        self._concurrency: dict[str, int | None] = {}

    def register(self, trial_id: str, upstream: str, real_key_env: str | None = None,
                 limits: TrialLimits | None = None, *, model: str | None = None) -> str:
        """Registers a trial; returns its stand-in key (give the sandbox only this).

        `upstream`: base URL the request path is appended to (`https://api.anthropic.com`,
        `https://api.openai.com`, `http://10.0.0.5:8000`); `real_key_env`: the variable whose
        real key the proxy's key table holds (None: the upstream needs no key; the stand-in is
        passed through as it came, which lets a scripted endpoint keep one session per trial);
        `model`: the spec's model, used to price responses that do not name theirs.
        Raises RebRayError for a trial id already registered, a variable that is unset, a
        concurrency that contradicts the upstream's, or a cost limit on an unpriced model.
        """
        limits = limits or TrialLimits()
        upstream = upstream.rstrip("/")
        if not upstream.startswith(("http://", "https://")):
            raise RebRayError(f"trial {trial_id}: upstream {upstream!r} is not an http(s) URL")
        if real_key_env is not None and not self.keys.get(real_key_env):
            where = "is not set in this process's environment" if self.keys is os.environ else "has no key in the proxy"
            raise RebRayError(f"trial {trial_id}: the key variable {real_key_env} {where}")
        if limits.max_cost_usd is not None and model is not None and self.prices.lookup(model) is None:
            raise RebRayError(f"trial {trial_id}: max_cost_usd needs a price for model {model!r}; "
                              f"add it to a prices file (table {self.prices.version})")
        with self._lock:
            if trial_id in self._by_id:
                raise RebRayError(f"trial {trial_id} is already registered with the proxy")
            known = self._concurrency.get(upstream)
            if known is not None and limits.max_concurrency not in (None, known):
                raise RebRayError(f"trial {trial_id}: upstream {upstream} already has max_concurrency={known}, "
                                  f"not {limits.max_concurrency}")
            if known is None:
                self._concurrency[upstream] = limits.max_concurrency
            key = STAND_IN_PREFIX + secrets.token_hex(20)
            meter = TrialMeter(trial_id, upstream, model, limits, self.prices, self.log_size)
            trial = Trial(trial_id, key, upstream, real_key_env, meter)
            self._by_key[key], self._by_id[trial_id] = trial, trial
        return key

    def unregister(self, trial_id: str) -> tuple[dict, list[dict]]:
        """Forgets the trial (its key stops working); returns its final (meter, request log)."""
        with self._lock:
            trial = self._by_id.pop(trial_id, None)
            if trial is None:
                raise RebRayError(f"trial {trial_id} is not registered with the proxy")
            self._by_key.pop(trial.key, None)
        return trial.meter.snapshot(), trial.meter.log()

    def get(self, trial_id: str) -> Trial:
        with self._lock:
            trial = self._by_id.get(trial_id)
        if trial is None:
            raise RebRayError(f"trial {trial_id} is not registered with the proxy")
        return trial

    def by_headers(self, headers) -> Trial | None:
        """The trial whose stand-in key the request carries, or None."""
        key = key_of(headers)
        with self._lock:
            return self._by_key.get(key) if key else None

    def concurrency(self, upstream: str) -> int | None:
        """The upstream's max requests in flight (None: no limit)."""
        with self._lock:
            return self._concurrency.get(upstream)
