"""`read_trial` (one trial's rows, read from the row groups that hold it) gives exactly what
reading everything and filtering gives, across sweeps, attempts, files and row groups."""

from __future__ import annotations

import pyarrow.compute as pc
import pyarrow.parquet as pq

from reb_ray.results.compact import ROW_GROUP_ROWS, compact
from reb_ray.results.parquet_sink import ParquetSink
from reb_ray.results.read import read_stages, read_trial, read_trials


def _rows(n: int, sweep: str, attempt: int = 1) -> tuple[list[dict], list[dict]]:
    trials = [{"sweep_id": sweep, "trial_id": f"a{i % 3}/t{i}/0", "attempt": attempt, "task_id": f"t{i}", "agent": f"a{i % 3}",
               "status": "scored" if i % 7 else "infra_error", "c0_missing": i} for i in range(n)]
    stages = [{"sweep_id": sweep, "trial_id": t["trial_id"], "attempt": attempt, "stage": s, "status": "success"}
              for t in trials[:: max(1, n // 50)] for s in ("c0", "c1")]
    return trials, stages


def _same(got, output, trial_id, sweep=None, stages=False):
    table = (read_stages if stages else read_trials)(output, sweep)
    want = table.filter(pc.equal(table["trial_id"], trial_id))
    assert got.schema == want.schema
    key = (lambda r: (r["sweep_id"], r["attempt"], r.get("stage") or ""))
    assert sorted(got.to_pylist(), key=key) == sorted(want.to_pylist(), key=key)
    return got


def test_one_trial_of_several_row_groups_and_sweeps(tmp_path):
    out = tmp_path / "run"
    n = ROW_GROUP_ROWS * 2 + 100  # three row groups
    with ParquetSink(out, flush_interval_s=0) as sink:
        for sweep, attempt in (("s1", 1), ("s1", 2), ("s2", 1)):
            trials, stages = _rows(n if sweep == "s1" and attempt == 1 else 40, sweep, attempt)
            sink.write(trials, stages)
    compact(out)
    # The big part in row groups of ROW_GROUP_ROWS, as compaction writes a large sweep's files.
    big = max((out / "trials").rglob("*.parquet"), key=lambda p: p.stat().st_size)
    pq.write_table(pq.read_table(big), big, row_group_size=ROW_GROUP_ROWS)
    assert pq.ParquetFile(big).num_row_groups == 3
    last = f"a{(n - 1) % 3}/t{n - 1}/0"
    assert _same(read_trial(out, last), out, last).num_rows == 1
    both = _same(read_trial(out, "a0/t3/0"), out, "a0/t3/0")  # in s1 twice (two attempts) and in s2
    assert sorted((r["sweep_id"], r["attempt"]) for r in both.to_pylist()) == [("s1", 1), ("s1", 2), ("s2", 1)]
    assert _same(read_trial(out, "a0/t3/0", "s1"), out, "a0/t3/0", "s1").num_rows == 2
    assert _same(read_trial(out, "a0/t0/0", stages=True), out, "a0/t0/0", stages=True).num_rows == 6
    assert read_trial(out, "nobody/t/0").num_rows == 0 and read_trial(tmp_path / "none", "x").num_rows == 0
