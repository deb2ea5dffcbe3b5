"""The paper-compatible summary, every number checked by hand on a small table."""

from __future__ import annotations

import csv
import io

from analysis.paper import COLUMNS, paper_summary, to_csv
from reb_ray.results.parquet_sink import rows_to_table
from reb_ray.results.schema import TRIALS_SCHEMA


def _rows():
    base = {"sweep_id": "s", "agent": "a", "attempt": 1, "status": "scored"}
    return [
        dict(base, trial_id="a/t1/0", c0_missing=2, c0_total=10, c1_status="success", c2_status="failure",
             c3_status="failure", c4_status="skipped", c5_path=0, c5_version=1, c5_capability=1, c5_underclaims=0,
             agent_wall_time_s=10.0, env_size_bytes=2_000_000_000),
        dict(base, trial_id="a/t2/0", c0_missing=None, c0_total=5, c0_status="not_run", c1_status="not_run",
             c2_status="success", c3_status="success", c4_status="failure", c5_path=1, c5_version=0, c5_capability=0,
             c5_underclaims=2, agent_wall_time_s=30.0, env_size_bytes=None),
        dict(base, trial_id="a/t3/0", status="infra_error", c0_missing=99, c0_total=99, agent_wall_time_s=1000.0),
    ]


def test_each_number_by_hand():
    (row,) = paper_summary(rows_to_table(_rows(), TRIALS_SCHEMA))
    assert row["trials"] == 2  # the infra row is not scored
    assert row["c0_missing_over_total"] == "2/15"  # missing 2 + (null -> 0); totals 10 + 5
    assert row["c1_cpu_success_over_all"] == "1/2"  # success, not_run (counts against)
    assert row["c2_cuda_success_over_all"] == "1/2"
    assert row["c3_single_gpu_success_over_all"] == "1/2"
    assert row["c4_multi_gpu_success_over_all"] == "0/1"  # skipped is outside the denominator
    assert (row["c5_path_sum"], row["c5_version_sum"], row["c5_capability_sum"], row["c5_underclaims_sum"]) == (1, 1, 1, 2)
    assert row["agent_wall_time_avg_sec"] == 20.0  # (10 + 30) / 2; the infra row's 1000 s is left out
    assert row["env_size_avg_gb"] == 2.0  # the null size is left out of the mean
    assert (row["c0_not_run"], row["c1_not_run"], row["infra_errors"]) == (1, 1, 1)
    assert row["input_tokens"] is None


def test_csv_has_the_release_column_names():
    text = to_csv(paper_summary(rows_to_table(_rows(), TRIALS_SCHEMA)))
    header = next(csv.reader(io.StringIO(text)))
    assert header == COLUMNS
    for name in ("c0_missing_over_total", "c1_cpu_success_over_all", "c4_multi_gpu_success_over_all", "c5_path_sum",
                 "agent_wall_time_avg_sec", "env_size_avg_gb"):
        assert name in header
