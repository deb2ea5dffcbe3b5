"""The sweep's budget (`--max-cost-usd`, in USD) and the retry backoff of LLM failures.

`SweepBudget` counts USD from the trials rows: the cost already recorded for the sweep (every
attempt of earlier runs, infra ones included: money spent is spent) plus each attempt as it
finishes. The orchestrator launches no new trial once `reached`; attempts already running
finish and are counted. A resume reads the recorded cost again and so continues where the
budget stopped (with a larger `--max-cost-usd`, the rest of the sweep runs). An attempt that
used an LLM but whose cost is unknown cannot be counted: `unknown` says how many (a sweep with
a budget refuses to start with an LLM agent whose model the price table lacks, so this stays 0
unless a response came without usage).

`RetryBackoff`: how long an attempt that failed for a rate limit or an unavailable endpoint
waits before its retry: base * 2**(n-1) seconds for the trial's n-th such retry in this run,
at least the endpoint's Retry-After, at most `max_s`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc


@dataclass
class SweepBudget:
    """`limit_usd` (> 0), `spent_usd` so far, `unknown` attempts with an LLM but no known cost."""

    limit_usd: float
    spent_usd: float = 0.0
    unknown: int = 0

    @classmethod
    def from_rows(cls, limit_usd: float, output: Path, sweep_id: str) -> SweepBudget:
        """The budget with what the sweep's rows under `output` already record as spent.
        Raises RebRayError (reb_ray.results.read) for an unreadable shard."""
        from reb_ray.results.read import read_trials

        return cls.from_table(limit_usd, read_trials(output, sweep_id, columns=["cost_usd", "llm_requests", "reused_from"]))

    @classmethod
    def from_table(cls, limit_usd: float, rows: pa.Table) -> SweepBudget:
        """The budget with what one sweep's trials `rows` (columns cost_usd, llm_requests,
        reused_from) record as spent."""
        rows = rows.filter(pc.is_null(rows["reused_from"]))  # a reused trial was paid for by the sweep that ran it
        budget = cls(limit_usd)
        budget.spent_usd = pc.sum(rows["cost_usd"]).as_py() or 0.0  # the same sum `add` makes, in Arrow
        budget.unknown = pc.sum(pc.and_(pc.is_null(rows["cost_usd"]), pc.greater(rows["llm_requests"], 0))).as_py() or 0
        return budget

    def add(self, row: dict) -> None:
        """Counts one attempt's trials row (its `cost_usd`; `llm_requests` tells an LLM attempt)."""
        if row.get("cost_usd") is not None:
            self.spent_usd += row["cost_usd"]
        elif row.get("llm_requests"):
            self.unknown += 1

    @property
    def reached(self) -> bool:
        return self.spent_usd >= self.limit_usd

    def describe(self) -> str:
        """One line: spent of the limit, and how many attempts had an unknown cost."""
        line = f"${self.spent_usd:.4f} of --max-cost-usd {self.limit_usd:g} spent"
        return line + (f" ({self.unknown} attempt(s) of unknown cost not counted)" if self.unknown else "")


@dataclass(frozen=True)
class RetryBackoff:
    """Seconds before the n-th (1, 2, ...) retry of a rate-limited / unavailable attempt."""

    base_s: float = 10.0
    max_s: float = 300.0

    def delay(self, n: int, retry_after_s: float | None = None) -> float:
        wait = self.base_s * 2 ** max(n - 1, 0)
        if retry_after_s is not None:
            wait = max(wait, retry_after_s)
        return min(wait, self.max_s)
