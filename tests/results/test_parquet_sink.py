"""ParquetSink / readers / MemorySink on real Parquet files under tmp_path (no mocks)."""

from __future__ import annotations

import datetime as dt
import multiprocessing
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from reb_ray.errors import RebRayError
from reb_ray.results.memory_sink import MemorySink
from reb_ray.results.parquet_sink import ParquetSink, shard_name
from reb_ray.results.read import read_stages, read_trials, scored_trial_ids
from reb_ray.results.schema import SCHEMA_VERSION, STAGES_SCHEMA, TRIALS_SCHEMA


def trial(n: int, sweep: str = "s1", attempt: int = 1, **extra) -> dict:
    row = {
        "sweep_id": sweep,
        "trial_id": f"agentA/task{n}/0",
        "attempt": attempt,
        "trial_index": 0,
        "task_id": f"task{n}",
        "agent": "agentA",
        "status": "scored",
    }
    row.update(extra)
    return row


def stage(n: int, sweep: str = "s1", attempt: int = 1, **extra) -> dict:
    row = {
        "sweep_id": sweep,
        "trial_id": f"agentA/task{n}/0",
        "attempt": attempt,
        "task_id": f"task{n}",
        "agent": "agentA",
        "stage": "c1",
        "status": "success",
    }
    row.update(extra)
    return row


def all_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def test_round_trip(tmp_path):
    started = dt.datetime(2024, 5, 1, 12, 0, 0, tzinfo=dt.timezone.utc)
    trials = [
        trial(
            1,
            c0_missing=3,
            c0_total=40,
            c0_missing_modules=["torch", "numpy"],
            agent_timed_out=False,
            agent_wall_time_s=12.5,
            started_at=started,
        )
    ]
    stages = [stage(1, exit_code=0, duration_s=1.5, log_tail="ok"), stage(1, stage="c0")]
    written = ParquetSink(tmp_path).write(trials, stages)
    assert [p.name for p in written] == [
        shard_name([("agentA/task1/0", 1)]),
        shard_name([("agentA/task1/0", 1)]),
    ]
    assert written[0].parent == tmp_path / "trials" / "sweep_id=s1"
    assert written[1].parent == tmp_path / "stages" / "sweep_id=s1"

    got = read_trials(tmp_path)
    assert got.schema.equals(TRIALS_SCHEMA)
    assert got.num_rows == 1
    row = got.to_pylist()[0]
    assert row["schema_version"] == SCHEMA_VERSION
    assert row["c0_missing_modules"] == ["torch", "numpy"]
    assert row["started_at"] == started
    assert row["agent_wall_time_s"] == 12.5
    assert row["c1_exit_code"] is None  # missing key -> null, never 0
    assert row["env_size_bytes"] is None

    got_stages = read_stages(tmp_path, "s1")
    assert got_stages.schema.equals(STAGES_SCHEMA)
    assert got_stages.column("stage").to_pylist() == ["c1", "c0"]
    assert got_stages.column("exit_code").to_pylist() == [0, None]

    # The layout is also readable as a hive-partitioned dataset by plain pyarrow.
    hive = ds.dataset(tmp_path / "trials", format="parquet", partitioning="hive")
    assert hive.to_table(columns=["trial_id"]).num_rows == 1


def test_shard_names_are_deterministic_and_sanitised(tmp_path):
    assert shard_name([("agentA/task1/0", 2)]) == shard_name([("agentA/task1/0", 2)])
    single = shard_name([("agentA/task1/0", 2)])
    assert single.startswith("part-agentA_task1_0-") and single.endswith("-a2.parquet")
    assert "/" not in single
    # ids that sanitise alike still get distinct names
    assert shard_name([("a_b/c/0", 1)]) != shard_name([("a/b_c/0", 1)])
    assert shard_name([("plain", 1)]) == "part-plain-a1.parquet"
    multi = shard_name([("x/1/0", 1), ("x/2/0", 1)])
    assert multi == shard_name([("x/2/0", 1), ("x/1/0", 1)])  # order-independent
    assert multi.startswith("part-multi-") and multi.endswith("-n2.parquet")


def test_f12_all_null_batch_then_typed_batch(tmp_path):
    """Field case F12: an all-null batch must not make the column null-typed."""
    sink = ParquetSink(tmp_path)
    sink.write([trial(n, c1_exit_code=None) for n in range(5)], [])
    sink.write([], [])
    sink.write([trial(n, c1_exit_code=0) for n in range(5, 10)], [])

    got = read_trials(tmp_path)
    assert got.num_rows == 10
    assert got.schema.field("c1_exit_code").type == pa.int64()
    assert got.column("c1_exit_code").null_count == 5
    assert sorted(got.column("c1_exit_code").to_pylist(), key=lambda v: v is None) == [0] * 5 + [
        None
    ] * 5
    assert not [f.name for f in got.schema if pa.types.is_null(f.type)]
    # the all-null shard itself is typed on disk too
    for path in all_files(tmp_path / "trials"):
        assert pq.read_schema(path).field("c1_exit_code").type == pa.int64()


def test_empty_write_writes_nothing(tmp_path):
    assert ParquetSink(tmp_path).write([], []) == []
    assert not (tmp_path / "trials").exists() and not (tmp_path / "stages").exists()
    assert read_trials(tmp_path).num_rows == 0
    assert read_trials(tmp_path).schema.equals(TRIALS_SCHEMA)
    assert read_stages(tmp_path / "nowhere").schema.equals(STAGES_SCHEMA)
    assert scored_trial_ids(tmp_path, "s1") == set()


def test_atomic_write_leaves_no_temp_and_reader_ignores_stray_tmp(tmp_path):
    sink = ParquetSink(tmp_path)
    sink.write([trial(1)], [stage(1)])
    names = [p.name for p in all_files(tmp_path)]
    assert all(n.startswith("part-") and n.endswith(".parquet") for n in names), names
    assert len(names) == 2

    sweep_dir = tmp_path / "trials" / "sweep_id=s1"
    # A crash mid-write leaves a temp file: torn content, visible or hidden name.
    (sweep_dir / "part-agentA_task9_0-a1.parquet.tmp").write_bytes(b"PAR1 torn")
    (sweep_dir / ".part-x.parquet.123.abc.tmp").write_bytes(b"PAR1 torn")
    got = read_trials(tmp_path)
    assert got.column("trial_id").to_pylist() == ["agentA/task1/0"]

    # Rewriting the same attempt replaces its shard; no duplicate rows, no leftovers.
    sink.write([trial(1, status="infra_error")], [])
    got = read_trials(tmp_path)
    assert got.column("status").to_pylist() == ["infra_error"]
    visible = [p.name for p in sweep_dir.iterdir() if not p.name.endswith(".tmp")]
    assert len(visible) == 1


def test_unknown_key_raises_and_writes_nothing(tmp_path):
    sink = ParquetSink(tmp_path)
    with pytest.raises(ValueError, match="c9_bogus"):
        sink.write([trial(1, c9_bogus=1)], [])
    with pytest.raises(ValueError, match="stage_bogus"):
        sink.write([trial(1)], [stage(1, stage_bogus="x")])
    assert all_files(tmp_path) == []  # validation happens before any write
    with pytest.raises(ValueError, match="c9_bogus"):
        MemorySink().write([trial(1, c9_bogus=1)], [])


def test_bad_rows_raise_value_error(tmp_path):
    sink = ParquetSink(tmp_path)
    with pytest.raises(ValueError, match="sweep_id"):
        sink.write([trial(1, sweep_id=None)], [])
    with pytest.raises(ValueError, match="attempt"):
        sink.write([trial(1, attempt=None)], [])
    with pytest.raises(ValueError):
        sink.write([trial(1, c0_missing="many")], [])
    with pytest.raises(ValueError, match="schema_version"):
        sink.write([trial(1, schema_version=SCHEMA_VERSION + 1)], [])


def test_scored_trial_ids_ignores_infra_error(tmp_path):
    sink = ParquetSink(tmp_path)
    sink.write([trial(1, status="infra_error", attempt=1)], [])
    sink.write([trial(1, status="scored", attempt=2)], [])
    sink.write([trial(2, status="infra_error")], [])
    sink.write([trial(3, status="interrupted")], [])
    sink.write([trial(4, status="scored")], [])
    sink.write([trial(5, status="scored", sweep="other")], [])
    assert scored_trial_ids(tmp_path, "s1") == {"agentA/task1/0", "agentA/task4/0"}
    assert scored_trial_ids(tmp_path, "other") == {"agentA/task5/0"}
    assert scored_trial_ids(tmp_path, "absent") == set()


def test_two_sweeps_partition_separately(tmp_path):
    sink = ParquetSink(tmp_path)
    # one call holding rows of two sweeps gives one shard per sweep directory
    written = sink.write([trial(1, sweep="s1"), trial(2, sweep="s2/b")], [stage(1, sweep="s1")])
    assert len(written) == 3
    dirs = sorted(p.name for p in (tmp_path / "trials").iterdir())
    assert dirs == ["sweep_id=s1", "sweep_id=s2%2Fb"]
    sink.write([trial(3, sweep="s1")], [])

    assert sorted(read_trials(tmp_path, "s1").column("trial_id").to_pylist()) == [
        "agentA/task1/0",
        "agentA/task3/0",
    ]
    assert read_trials(tmp_path, "s2/b").column("trial_id").to_pylist() == ["agentA/task2/0"]
    assert read_trials(tmp_path).num_rows == 3
    assert read_stages(tmp_path, "s2/b").num_rows == 0
    assert read_stages(tmp_path, "s1").num_rows == 1

    hive = ds.dataset(tmp_path / "trials", format="parquet", partitioning="hive")
    assert hive.to_table(filter=ds.field("sweep_id") == "s2/b").num_rows == 1


def test_multi_trial_batch_is_one_shard(tmp_path):
    written = ParquetSink(tmp_path).write([trial(n) for n in range(3)], [])
    assert len(written) == 1 and written[0].name.startswith("part-multi-")
    assert read_trials(tmp_path).num_rows == 3


def test_foreign_or_corrupt_shard_raises_one_line_naming_file(tmp_path):
    ParquetSink(tmp_path).write([trial(1)], [])
    sweep_dir = tmp_path / "trials" / "sweep_id=s1"

    foreign = sweep_dir / "part-foreign-a1.parquet"
    pq.write_table(pa.table({"sweep_id": ["s1"], "c0_missing": ["three"]}), foreign)
    with pytest.raises(RebRayError) as info:
        read_trials(tmp_path)
    message = str(info.value)
    assert str(foreign) in message and "\n" not in message
    foreign.unlink()

    extra = sweep_dir / "part-extra-a1.parquet"
    pq.write_table(pa.table({"sweep_id": ["s1"], "surprise": [1]}), extra)
    with pytest.raises(RebRayError, match="surprise"):
        read_trials(tmp_path)
    extra.unlink()

    wrong_dataset = sweep_dir / "part-stage-a1.parquet"
    pq.write_table(STAGES_SCHEMA.empty_table(), wrong_dataset)
    with pytest.raises(RebRayError, match="stages"):
        read_trials(tmp_path)
    wrong_dataset.unlink()

    corrupt = sweep_dir / "part-corrupt-a1.parquet"
    corrupt.write_bytes(b"not parquet at all")
    with pytest.raises(RebRayError) as info:
        read_trials(tmp_path)
    message = str(info.value)
    assert str(corrupt) in message and "\n" not in message
    corrupt.unlink()

    assert read_trials(tmp_path).num_rows == 1


def test_older_shard_missing_trailing_columns_reads_as_null(tmp_path):
    sweep_dir = tmp_path / "trials" / "sweep_id=s1"
    sweep_dir.mkdir(parents=True)
    older = pa.schema(list(TRIALS_SCHEMA)[:-2], metadata=TRIALS_SCHEMA.metadata)
    pq.write_table(
        pa.Table.from_pylist([{**trial(1), "schema_version": 1}], schema=older),
        sweep_dir / "part-old-a1.parquet",
    )
    got = read_trials(tmp_path)
    assert got.schema.equals(TRIALS_SCHEMA)
    assert got.column("finished_at").to_pylist() == [None]


def _write_one(args: tuple[str, int]) -> None:
    out, n = args
    ParquetSink(Path(out)).write([trial(n)], [stage(n), stage(n, stage="c0")])


def test_concurrent_processes_writing_different_trials(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(4) as pool:
        pool.map(_write_one, [(str(tmp_path), n) for n in range(16)])
    expected = {f"agentA/task{n}/0" for n in range(16)}
    assert scored_trial_ids(tmp_path, "s1") == expected
    assert read_stages(tmp_path).num_rows == 32
    assert not [p for p in all_files(tmp_path) if p.name.endswith(".tmp")]


def test_memory_sink_keeps_tables():
    sink = MemorySink()
    assert sink.trials.schema.equals(TRIALS_SCHEMA) and sink.trials.num_rows == 0
    sink.write([trial(n, c1_exit_code=None) for n in range(2)], [stage(1)])
    sink.write([], [])
    sink.write([trial(5, c1_exit_code=0)], [])
    assert sink.trials.num_rows == 3
    assert sink.trials.schema.field("c1_exit_code").type == pa.int64()
    assert sink.trials.column("schema_version").to_pylist() == [SCHEMA_VERSION] * 3
    assert sink.stages.num_rows == 1 and sink.stages.schema.equals(STAGES_SCHEMA)
