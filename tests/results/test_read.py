"""reb_ray.results.read.latest_attempts: which attempt of a trial counts, on real Parquet."""

from __future__ import annotations

import pytest

from reb_ray.results.parquet_sink import ParquetSink, rows_to_table
from reb_ray.results.read import latest_attempts, read_trials, scored_trial_ids
from reb_ray.results.schema import TRIALS_SCHEMA


def trial(task: str, attempt: int | None, status: str, sweep: str = "s1", **extra) -> dict:
    return {"sweep_id": sweep, "trial_id": f"a/{task}/0", "attempt": attempt, "task_id": task, "agent": "a",
            "status": status, **extra}


ROWS = [
    # rerun: two scored attempts, the higher counts
    trial("rerun", 1, "scored", c0_missing=5), trial("rerun", 2, "scored", c0_missing=1, rerun=True),
    # a rerun lost to infra does not erase the earlier score
    trial("lost", 1, "scored", c0_missing=3), trial("lost", 2, "infra_error", rerun=True),
    # retried after infra, then scored
    trial("retried", 1, "infra_error"), trial("retried", 2, "scored", c0_missing=0),
    # never scored: the highest attempt stands for it
    trial("never", 1, "infra_error", failure_category="infra_clone"),
    trial("never", 2, "interrupted"),
    # the same trial id in another sweep is another trial
    trial("rerun", 1, "scored", sweep="s2", c0_missing=9),
]


def test_latest_attempts_rule(tmp_path):
    sink = ParquetSink(tmp_path)
    for r in ROWS:
        sink.write([r], [])
    latest = latest_attempts(read_trials(tmp_path))
    got = sorted((r["sweep_id"], r["task_id"], r["attempt"], r["status"], r["c0_missing"]) for r in latest.to_pylist())
    assert got == [
        ("s1", "lost", 1, "scored", 3),
        ("s1", "never", 2, "interrupted", None),
        ("s1", "rerun", 2, "scored", 1),
        ("s1", "retried", 2, "scored", 0),
        ("s2", "rerun", 1, "scored", 9),
    ]
    assert latest.schema.equals(TRIALS_SCHEMA)
    # resume uses the same rule: a trial is done when its current attempt is scored
    assert scored_trial_ids(tmp_path, "s1") == {"a/lost/0", "a/rerun/0", "a/retried/0"}
    # the rerun is recorded in the row
    rerun_row = next(r for r in latest.to_pylist() if r["task_id"] == "rerun" and r["sweep_id"] == "s1")
    assert rerun_row["rerun"] is True


def test_latest_attempts_edge_cases():
    table = rows_to_table([trial("x", None, "scored", c0_missing=1), trial("x", 1, "infra_error"),
                           {"sweep_id": "s1", "trial_id": None, "attempt": 1, "status": "scored"},
                           {"sweep_id": "s1", "trial_id": None, "attempt": 1, "status": "scored"}], TRIALS_SCHEMA)
    latest = latest_attempts(table).to_pylist()
    assert [(r["trial_id"], r["status"]) for r in latest] == [("a/x/0", "scored"), (None, "scored"), (None, "scored")]
    assert latest_attempts(TRIALS_SCHEMA.empty_table()).num_rows == 0
    with pytest.raises(KeyError, match="attempt"):
        latest_attempts(table.drop_columns(["attempt"]))


def test_read_stages_reads_only_the_columns_asked(tmp_path):
    from reb_ray.results.read import read_stages

    stage = {"sweep_id": "s1", "trial_id": "a/t1/0", "attempt": 1, "stage": "c5", "status": "success",
             "raw": "{}", "log_head": "x" * 1000}
    ParquetSink(tmp_path).write([], [stage, {**stage, "stage": "c1", "raw": None}])
    table = read_stages(tmp_path, columns=["stage", "raw"])
    assert table.column_names == ["stage", "raw"]
    assert sorted(table.to_pylist(), key=lambda r: r["stage"]) == [{"stage": "c1", "raw": None}, {"stage": "c5", "raw": "{}"}]
    assert read_stages(tmp_path / "missing", columns=["stage"]).column_names == ["stage"]
