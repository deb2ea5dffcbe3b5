"""The sweep's budget counted from real Parquet rows, and the retry backoff of LLM failures."""

from __future__ import annotations

import pytest

from reb_ray.scheduling.budget import RetryBackoff, SweepBudget
from tests.analysis.runs import row, write_run


def test_backoff_doubles_honours_retry_after_and_is_capped():
    backoff = RetryBackoff(10.0, 300.0)
    assert [backoff.delay(n) for n in (1, 2, 3, 6, 9)] == [10.0, 20.0, 40.0, 300.0, 300.0]
    assert backoff.delay(1, retry_after_s=45.0) == 45.0 and backoff.delay(3, retry_after_s=5.0) == 40.0
    assert backoff.delay(1, retry_after_s=3600.0) == 300.0


def test_budget_counts_every_recorded_attempt_and_reports_unknown_costs(tmp_path):
    write_run(tmp_path, [
        row("a", "t1", 1, "infra_error", cost_usd=0.25, llm_requests=3),  # money spent on an infra attempt counts
        row("a", "t1", 2, "scored", cost_usd=0.5, llm_requests=4),
        row("a", "t2", 1, "scored", cost_usd=None, llm_requests=2),  # an LLM attempt of unknown cost
        row("h", "t1", 1, "scored"),  # no LLM
        row("a", "t3", 1, "scored", sweep="other", cost_usd=7.0, llm_requests=1),
    ])
    budget = SweepBudget.from_rows(1.0, tmp_path, "s1")
    assert budget.spent_usd == pytest.approx(0.75) and budget.unknown == 1 and not budget.reached
    budget.add({"cost_usd": 0.25, "llm_requests": 1})
    assert budget.reached
    assert budget.describe() == "$1.0000 of --max-cost-usd 1 spent (1 attempt(s) of unknown cost not counted)"
    assert SweepBudget.from_rows(1.0, tmp_path / "nothing", "s1").spent_usd == 0.0
