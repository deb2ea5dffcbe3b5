"""analysis.scores: the one computation behind every summary, on hand-made tables."""

from __future__ import annotations

import pyarrow as pa
import pytest

from analysis.outcomes import stage_outcome
from analysis.scores import COLUMNS, summarize
from reb_ray.results.parquet_sink import rows_to_table
from reb_ray.results.schema import TRIALS_SCHEMA

from .runs import row


def one_table(table: pa.Table) -> dict:
    (summary,) = summarize(table)
    return summary


def one(rows: list[dict]) -> dict:
    return one_table(rows_to_table(rows, TRIALS_SCHEMA))


@pytest.mark.parametrize(("status", "category", "expected"), [
    ("success", None, "success"),
    ("skipped", None, "skipped"),
    (None, None, None),  # a stage the row predates: unknown
    ("failure", None, "failure"),  # no category: the agent's
    ("failure", "runtime", "failure"),
    ("failure", "insufficient_hardware", "hardware"),
    ("not_run", "insufficient_hardware", "hardware"),
    ("not_run", "deps", "failure"),  # a not_run the agent caused is the agent's failure
    ("not_run", "infra_assets_missing", "not_run"),
    ("not_run", None, "not_run"),  # owner unknown: unmeasured, neither pass nor fail
    ("failure", "infra_toolbox", "not_run"),
])
def test_stage_outcome(status, category, expected):
    assert stage_outcome({"c4_status": status, "c4_failure_category": category}, "c4") == expected


def test_hardware_failures_are_not_the_agents():
    """Issue 9 item 19: three GPU stages that failed for lack of GPUs are not `failed 3`."""
    rows = [row("a", f"t{i}", 1, "scored", c1_status="success",
                **{f"c{n}_status": "failure" for n in (2, 3, 4)},
                **{f"c{n}_failure_category": "insufficient_hardware" for n in (2, 3, 4)}) for i in range(3)]
    summary = one(rows)
    for name in ("c2_cuda", "c3_single_gpu", "c4_multi_gpu"):
        assert (summary[f"{name}_denom"], summary[f"{name}_success_over_all"]) == (3, "0/3")  # the paper's rate
        assert (summary[f"{name}_failed"], summary[f"{name}_hardware"], summary[f"{name}_skipped"]) == (0, 3, 3)
        assert summary[f"{name}_success_over_measured"] is None  # nothing measured against the agent
    assert summary["c1_cpu_success_over_measured"] == "3/3"


def test_unknown_c0_stays_unknown():
    """Issue 9 items 1 and 3: a C0 that did not run is not 0 missing (no `or 0`)."""
    summary = one([row("a", "t1", 1, "scored", c0_status="not_run", c0_missing=None, c0_total=1)])
    assert (summary["c0_missing_sum"], summary["c0_total_sum"], summary["c0_missing_over_total"]) == (None, 1, None)
    assert summary["c0_not_run"] == 1
    # An agent-caused non-run is graded a failure with every import missing: it counts.
    summary = one([row("a", "t1", 1, "scored", c0_status="failure", c0_missing=6, c0_total=6),
                   row("a", "t2", 1, "scored", c0_status="success", c0_missing=1, c0_total=5)])
    assert summary["c0_missing_over_total"] == "7/11"


def test_tokens_read_by_name_when_present():
    """The token columns come later: read by name, unknown stays None, never 0."""
    base = rows_to_table([row("a", "t1", 1, "scored"), row("a", "t2", 1, "scored"), row("a", "t3", 1, "scored")],
                         TRIALS_SCHEMA)
    summary = one_table(base)
    assert [summary[k] for k in ("agent_tokens_input_sum", "agent_tokens_output_sum", "agent_tokens_total_sum",
                                 "agent_tokens_total_avg")] == [None] * 4
    with_tokens = base.append_column("input_tokens", pa.array([100, 7, None], pa.int64())) \
                      .append_column("output_tokens", pa.array([10, 3, 5], pa.int64()))
    summary = one_table(with_tokens)
    assert summary["agent_tokens_input_sum"] == 107  # 100 + 7
    assert summary["agent_tokens_output_sum"] == 18  # 10 + 3 + 5
    assert summary["agent_tokens_total_sum"] == 120  # (100 + 10) + (7 + 3); t3 lacks its input count
    assert summary["agent_tokens_total_avg"] == 60.0  # 120 over the 2 trials that know both


def test_a_table_with_only_the_identity_columns():
    """Columns other than the identity ones may be absent: they read as null."""
    table = pa.table({"sweep_id": ["s"], "trial_id": ["a/t/0"], "attempt": [1], "status": ["scored"], "agent": ["a"]})
    summary = one_table(table)
    assert summary["job_count"] == 1 and summary["stages_missing_assets_sum"] is None and summary["reruns"] == 0
    assert summary["c1_cpu_denom"] == 0 and summary["c1_cpu_success_over_all"] is None
    assert list(summary) == COLUMNS
    with pytest.raises(KeyError, match="attempt"):
        summarize(table.drop_columns(["attempt"]))
    with pytest.raises(KeyError, match="agent"):
        summarize(table.drop_columns(["agent"]))


def test_rounding_and_units():
    """Issue 9 item 4: GiB (2**30) rounded to 3 decimals, seconds rounded to 2."""
    summary = one([row("a", "t1", 1, "scored", agent_wall_time_s=1.0 / 3, env_size_apparent_bytes=10**9,
                       env_size_bytes=6 * 10**8)])
    assert summary["agent_wall_time_avg_sec"] == 0.33
    assert summary["env_size_avg_gb"] == 0.931  # 1e9 / 2**30 = 0.9313 (1e9 bytes would be "1.0" GB)
    # The paper's column is the release's measure (every path); ours, each inode once, beside it.
    assert (summary["env_size_unique_avg_gb"], summary["env_unique_valid_jobs"]) == (0.559, 1)  # 6e8 / 2**30
