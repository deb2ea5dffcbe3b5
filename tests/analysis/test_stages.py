"""Stage outcome distribution and probe time, checked by hand on a small table."""

from __future__ import annotations

import pyarrow as pa

from analysis.__main__ import main
from analysis.stages import format_distribution, median_probe_time, stage_distribution
from reb_ray.results.parquet_sink import rows_to_table
from reb_ray.results.schema import TRIALS_SCHEMA

from .runs import row, write_run

ROWS = [
    row("a", "t1", 1, "scored", c0_status="success", c1_status="failure", c2_status="skipped",
        c4_status="failure", c4_failure_category="insufficient_hardware", probe_wall_time_s=2.0),
    row("a", "t2", 1, "scored", c0_status="failure", c1_status="failure", c2_status="failure",
        c2_failure_category="insufficient_hardware", c4_status="failure", c4_failure_category="runtime",
        probe_wall_time_s=4.0),
    # t3: a first scored attempt superseded by a rerun; only attempt 2 counts.
    row("a", "t3", 1, "scored", c0_status="success", c1_status="success", c2_status="success", probe_wall_time_s=500.0),
    row("a", "t3", 2, "scored", c0_status="not_run", c1_status="not_run", c2_status="not_run",
        probe_wall_time_s=9.0, rerun=True),
    row("a", "t4", 1, "infra_error", c0_status="not_run", probe_wall_time_s=100.0),
]


def table() -> pa.Table:
    return rows_to_table(ROWS, TRIALS_SCHEMA)


def test_counts_split_hardware_from_the_agent():
    dist = stage_distribution(table())[("s1", "a")]
    assert dist["c0"] == {"success": 1, "failure": 1, "not_run": 1}  # infra row and t3 attempt 1 left out
    assert dist["c1"] == {"failure": 2, "not_run": 1}
    assert dist["c2"] == {"skipped": 1, "hardware": 1, "not_run": 1}  # t2's C2 lacked a GPU: not the agent's
    assert dist["c4"] == {"hardware": 1, "failure": 1, "-": 1}  # t3's C4 is null: unknown
    assert dist["c3"] == {"-": 3}  # column null in every row
    assert median_probe_time(table()) == {("s1", "a"): 4.0}  # median of 2, 4, 9


def test_format_and_main_stages(tmp_path, capsys):
    text = format_distribution(table())
    lines = text.splitlines()
    assert lines[0] == "sweep s1, agent a: median probe phase 4.0 s"
    assert lines[1].split() == ["stage", "success", "failure", "hardware", "not_run", "skipped", "-"]
    assert lines[2].split() == ["c0", "1", "1", "0", "1", "0", "0"]
    assert lines[6].split() == ["c4", "0", "1", "1", "0", "0", "1"]
    write_run(tmp_path, ROWS)
    assert main([str(tmp_path), "--stages"]) == 0
    assert text in capsys.readouterr().out
