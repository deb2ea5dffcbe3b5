"""analysis.summary on a hand-built trials table; every expected number is derived by hand."""

from __future__ import annotations

import pyarrow as pa
import pytest

from analysis.__main__ import main
from analysis.summary import format_summary, print_summary, summarize
from reb_ray.results.parquet_sink import ParquetSink
from reb_ray.results.schema import TRIALS_SCHEMA


def row(sweep, agent, task, attempt, status, **values) -> dict:
    base = {
        "schema_version": 1,
        "sweep_id": sweep,
        "trial_id": f"{agent}/{task}/0",
        "attempt": attempt,
        "trial_index": 0,
        "task_id": task,
        "agent": agent,
        "status": status,
    }
    assert set(values) <= set(TRIALS_SCHEMA.names), values  # from_pylist would drop typos
    return {**base, **values}


ROWS = [
    # --- sweep s1, alpha: 3 scored trials + 1 infra_error attempt --------------------------
    row("s1", "alpha", "t1", 1, "infra_error", failure_owner="infra"),
    row("s1", "alpha", "t1", 2, "scored", c0_status="success", c0_missing=2, c0_total=10,
        c1_status="success", c1_exit_code=0, agent_wall_time_s=100.0, env_size_bytes=200_000_000),
    row("s1", "alpha", "t2", 1, "scored", c0_status="not_run", c0_missing=None, c0_total=20,
        c1_status="not_run", agent_wall_time_s=None, env_size_bytes=None),
    row("s1", "alpha", "t3", 1, "scored", c0_status="success", c0_missing=0, c0_total=30,
        c1_status="skipped", agent_wall_time_s=50.0, env_size_bytes=100_000_000),
    # --- sweep s1, beta: 3 scored trials (t3 scored twice), 1 interrupted attempt ----------
    row("s1", "beta", "t1", 1, "scored", c0_status="success", c0_missing=5, c0_total=10,
        c1_status="failure", c1_exit_code=1, agent_wall_time_s=30.0, env_size_bytes=50_000_000),
    row("s1", "beta", "t2", 1, "scored", c0_status="failure", c0_missing=None, c0_total=20,
        c1_status="success", c1_exit_code=0, agent_wall_time_s=60.0, env_size_bytes=None),
    row("s1", "beta", "t3", 1, "scored", c0_status="success", c0_missing=9, c0_total=30,
        c1_status="failure", agent_wall_time_s=999.0, env_size_bytes=999_000_000),
    row("s1", "beta", "t3", 2, "scored", c0_status="success", c0_missing=1, c0_total=30,
        c1_status="success", c1_exit_code=0, agent_wall_time_s=90.0, env_size_bytes=70_000_000),
    row("s1", "beta", "t1", 0, "interrupted", c0_missing=50, c0_total=10, c1_status="success"),
    # --- sweep s1, gamma: infra errors only -------------------------------------------------
    row("s1", "gamma", "t1", 1, "infra_error"),
    row("s1", "gamma", "t2", 1, "infra_error"),
    # --- sweep s0, alpha: 1 scored trial ------------------------------------------------------
    row("s0", "alpha", "t1", 1, "scored", c0_status="success", c0_missing=1, c0_total=10,
        c1_status="success", agent_wall_time_s=10.0, env_size_bytes=1_000_000),
]

EXPECTED = [
    {
        "sweep_id": "s0",
        "agent": "alpha",
        "trials": 1,
        "c0_missing": 1,
        "c0_total": 10,
        "c0_not_run": 0,
        "c1_passed": 1,
        "c1_applicable": 1,
        "c1_not_run": 0,
        "mean_agent_wall_time_s": 10.0,
        "mean_env_size_bytes": 1_000_000.0,
        "infra_errors": 0,
    },
    {
        "sweep_id": "s1",
        "agent": "alpha",
        "trials": 3,  # t1 (attempt 2), t2, t3; the infra_error attempt of t1 is not a trial
        "c0_missing": 2,  # 2 (t1) + 0 (t3); t2's C0 did not run, its null is not a 0
        "c0_total": 60,  # 10 + 20 + 30: the denominator keeps t2 although its C0 did not run
        "c0_not_run": 1,  # t2
        "c1_passed": 1,  # t1
        "c1_applicable": 2,  # t1 success + t2 not_run; t3 skipped is not applicable
        "c1_not_run": 1,  # t2
        "mean_agent_wall_time_s": 75.0,  # (100 + 50) / 2, t2 null excluded
        "mean_env_size_bytes": 150_000_000.0,  # (200e6 + 100e6) / 2, t2 null excluded
        "infra_errors": 1,  # t1 attempt 1
    },
    {
        "sweep_id": "s1",
        "agent": "beta",
        "trials": 3,  # t1, t2, t3 (only t3's attempt 2 counts); interrupted row excluded
        "c0_missing": 6,  # 5 (t1) + 1 (t3 attempt 2); t2 null (C0 failed)
        "c0_total": 60,  # 10 + 20 + 30
        "c0_not_run": 0,  # t2's C0 failed, it did run
        "c1_passed": 2,  # t2 and t3 attempt 2
        "c1_applicable": 3,  # nothing skipped
        "c1_not_run": 0,
        "mean_agent_wall_time_s": 60.0,  # (30 + 60 + 90) / 3
        "mean_env_size_bytes": 60_000_000.0,  # (50e6 + 70e6) / 2, t2 null excluded
        "infra_errors": 0,
    },
    {
        "sweep_id": "s1",
        "agent": "gamma",
        "trials": 0,  # no scored rows
        "c0_missing": None,  # nothing known: null, never 0
        "c0_total": None,
        "c0_not_run": 0,
        "c1_passed": 0,
        "c1_applicable": 0,
        "c1_not_run": 0,
        "mean_agent_wall_time_s": None,
        "mean_env_size_bytes": None,
        "infra_errors": 2,  # t1, t2
    },
]


def table() -> pa.Table:
    return pa.Table.from_pylist(ROWS, schema=TRIALS_SCHEMA)


def test_summarize_matches_hand_computed_values():
    assert summarize(table()) == EXPECTED


def test_summarize_empty_and_missing_columns():
    assert summarize(TRIALS_SCHEMA.empty_table()) == []
    with pytest.raises(ValueError, match="c0_total"):
        summarize(table().drop_columns(["c0_total"]))


def test_format_summary_text():
    text = format_summary(EXPECTED)
    lines = text.splitlines()
    assert lines[0] == "sweep s0"
    header = lines[1]
    for column in ("agent", "trials", "C0 missing/total", "C1 passed/applicable",
                   "mean agent s", "mean env MB", "infra"):
        assert column in header
    assert "sweep s1" in lines
    alpha_s1 = next(line for line in lines[4:] if line.startswith("alpha"))
    assert alpha_s1.split() == ["alpha", "3", "2/60", "1", "1/2", "1", "75.0", "150.0", "1"]
    gamma = next(line for line in lines if line.startswith("gamma"))
    assert gamma.split() == ["gamma", "0", "-/-", "0", "0/0", "0", "-", "-", "2"]
    assert format_summary([]) == "no trials"


def test_print_summary_reads_parquet(tmp_path, capsys):
    sink = ParquetSink(tmp_path)
    for r in ROWS:  # one shard per attempt, as the workers write them
        sink.write([r], [])
    text = print_summary(tmp_path)
    assert capsys.readouterr().out.strip() == text
    assert text == format_summary(EXPECTED)

    only_s0 = print_summary(tmp_path, "s0")
    assert only_s0 == format_summary(EXPECTED[:1])

    capsys.readouterr()
    assert main([str(tmp_path), "--sweep-id", "s0"]) == 0
    assert capsys.readouterr().out.strip() == only_s0
