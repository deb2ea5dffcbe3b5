"""Stage status distribution and probe time, checked by hand on a small table."""

from __future__ import annotations

import pyarrow as pa

from analysis.stages import format_distribution, median_probe_time, stage_distribution
from reb_ray.results.parquet_sink import rows_to_table
from reb_ray.results.schema import TRIALS_SCHEMA


def _table() -> pa.Table:
    rows = [
        {"sweep_id": "s", "trial_id": "a/t1/0", "attempt": 1, "agent": "a", "status": "scored",
         "c0_status": "success", "c1_status": "failure", "c2_status": "skipped", "probe_wall_time_s": 2.0},
        {"sweep_id": "s", "trial_id": "a/t2/0", "attempt": 1, "agent": "a", "status": "scored",
         "c0_status": "failure", "c1_status": "failure", "c2_status": "failure", "probe_wall_time_s": 4.0},
        {"sweep_id": "s", "trial_id": "a/t3/0", "attempt": 1, "agent": "a", "status": "scored",
         "c0_status": "not_run", "c1_status": "not_run", "c2_status": "not_run", "probe_wall_time_s": 9.0},
        {"sweep_id": "s", "trial_id": "a/t4/0", "attempt": 1, "agent": "a", "status": "infra_error",
         "c0_status": "not_run", "probe_wall_time_s": 100.0},
    ]
    return rows_to_table(rows, TRIALS_SCHEMA)


def test_counts_and_median_ignore_infra_rows():
    dist = stage_distribution(_table())[("s", "a")]
    assert dist["c0_status"] == {"success": 1, "failure": 1, "not_run": 1}  # the infra row is left out
    assert dist["c1_status"] == {"failure": 2, "not_run": 1}
    assert dist["c3_status"] == {"-": 3}  # column null in every row
    assert median_probe_time(_table()) == {("s", "a"): 4.0}  # median of 2, 4, 9
    assert "c2" in format_distribution(_table())
