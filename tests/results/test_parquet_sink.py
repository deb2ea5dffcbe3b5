"""ParquetSink and the readers on real Parquet files under tmp_path (no mocks)."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from reb_ray.errors import RebRayError
from reb_ray.results.parquet_sink import ParquetSink, rows_to_table
from reb_ray.results.read import read_stages, read_trials, scored_trial_ids
from reb_ray.results.schema import SCHEMA_VERSION, STAGES_SCHEMA, TRIALS_SCHEMA
from tests.results.runs import STARTED, data_files, stage, trial, write_legacy

ROOT = Path(__file__).resolve().parents[2]


def on_disk(output_dir: Path, dataset: str = "trials") -> list[str]:
    """trial_ids in the dataset's files as plain pyarrow sees them (no flush of live sinks). A
    sweep's directory exists a moment before its first part is renamed into it: no part, no rows
    (a dataset of no file has no columns to read)."""
    files = sorted(str(p) for p in (output_dir / dataset).rglob("*.parquet")) if (output_dir / dataset).is_dir() else []
    if not files:
        return []
    return ds.dataset(files, format="parquet").to_table(columns=["trial_id"])["trial_id"].to_pylist()


def test_round_trip(tmp_path):
    trials = [trial(1, c0_missing=3, c0_total=40, c0_missing_modules=["torch", "numpy"], agent_timed_out=False,
                    agent_wall_time_s=12.5, started_at=STARTED)]
    stages = [stage(1, exit_code=0, duration_s=1.5, log_tail="ok"), stage(1, stage="c0")]
    with ParquetSink(tmp_path) as sink:
        written = sink.write(trials, stages)
    assert [p.parent for p in written] == [tmp_path / "trials" / "sweep-s1", tmp_path / "stages" / "sweep-s1"]
    index = tmp_path / "index" / "sweep-s1" / written[0].name  # the resume index of the trials part
    assert data_files(tmp_path) == sorted([*written, index])

    got = read_trials(tmp_path)
    assert got.schema.equals(TRIALS_SCHEMA)
    row = got.to_pylist()[0]
    assert got.num_rows == 1 and row["schema_version"] == SCHEMA_VERSION
    assert row["c0_missing_modules"] == ["torch", "numpy"]
    assert row["started_at"] == STARTED and row["agent_wall_time_s"] == 12.5
    assert row["c1_exit_code"] is None and row["env_size_bytes"] is None  # missing key -> null, never 0

    got_stages = read_stages(tmp_path, "s1")
    assert got_stages.schema.equals(STAGES_SCHEMA)
    assert got_stages.column("stage").to_pylist() == ["c1", "c0"]
    assert got_stages.column("exit_code").to_pylist() == [0, None]


def test_rows_roll_into_parts_not_one_file_per_attempt(tmp_path):
    """Before issue 12 every write was its own file: 50 attempts were 100 files."""
    with ParquetSink(tmp_path, part_rows=20) as sink:
        for n in range(50):
            sink.write([trial(n)], [stage(n), stage(n, stage="c0")])
    trials = sorted((tmp_path / "trials" / "sweep-s1").iterdir())
    stages = sorted((tmp_path / "stages" / "sweep-s1").iterdir())
    assert [pq.read_metadata(p).num_rows for p in trials] == [20, 20, 10]
    assert [pq.read_metadata(p).num_rows for p in stages] == [20, 20, 20, 20, 20]
    assert sorted(on_disk(tmp_path)) == sorted(f"agentA/task{n}/0" for n in range(50))
    assert read_stages(tmp_path).num_rows == 100


def test_a_lone_write_is_on_disk_when_write_returns(tmp_path):
    sink = ParquetSink(tmp_path, flush_interval_s=60)
    sink.write([trial(1)], [stage(1)])
    assert on_disk(tmp_path) == ["agentA/task1/0"] and on_disk(tmp_path, "stages") == ["agentA/task1/0"]
    sink.close()


def test_rows_in_a_burst_are_buffered_and_readers_here_still_see_them(tmp_path):
    sink = ParquetSink(tmp_path, flush_interval_s=60)
    sink.write([trial(1)], [])
    sink.write([trial(2)], [])  # within the interval: buffered
    assert on_disk(tmp_path) == ["agentA/task1/0"]
    assert sorted(read_trials(tmp_path)["trial_id"].to_pylist()) == ["agentA/task1/0", "agentA/task2/0"]
    assert sorted(on_disk(tmp_path)) == ["agentA/task1/0", "agentA/task2/0"]  # the read flushed it
    sink.write([trial(3)], [])
    sink.close()
    assert len(on_disk(tmp_path)) == 3
    with pytest.raises(ValueError, match="closed"):
        sink.write([trial(4)], [])


def test_buffered_rows_reach_disk_within_the_interval_without_another_call(tmp_path):
    sink = ParquetSink(tmp_path, flush_interval_s=0.3)
    sink.write([trial(1)], [])
    sink.write([trial(2)], [stage(2)])
    deadline = time.monotonic() + 20  # the bound is 0.3 s; the margin is for a loaded machine
    while (len(on_disk(tmp_path)) < 2 or not on_disk(tmp_path, "stages")) and time.monotonic() < deadline:
        time.sleep(0.05)  # a flush writes the trials part, then the stages part
    assert sorted(on_disk(tmp_path)) == ["agentA/task1/0", "agentA/task2/0"]
    assert on_disk(tmp_path, "stages") == ["agentA/task2/0"]
    sink.close()


def test_full_parts_that_pile_up_are_written_without_waiting_for_the_interval(tmp_path):
    """Issue 12: a full part waits for the next timed flush (so a burst writes each row about
    once), but once more than EARLY_SEALED_PARTS wait, the flusher starts at once: a 60 s
    interval would otherwise hold them. Each part keeps exactly its rows."""
    from reb_ray.results.parquet_sink import EARLY_SEALED_PARTS

    sink = ParquetSink(tmp_path, flush_interval_s=60, part_rows=2)
    sink.write([trial(0)], [])  # a lone write: on disk when it returns
    for n in range(1, 2 * (EARLY_SEALED_PARTS + 1) + 1):
        sink.write([trial(n)], [])  # every second write fills a part
    deadline = time.monotonic() + 20  # well inside the interval; the margin is for a loaded machine
    while len(on_disk(tmp_path)) < 2 * (EARLY_SEALED_PARTS + 1) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(on_disk(tmp_path)) >= 2 * (EARLY_SEALED_PARTS + 1)
    sink.close()
    written = 2 * (EARLY_SEALED_PARTS + 1) + 1
    assert sorted(on_disk(tmp_path)) == sorted(f"agentA/task{n}/0" for n in range(written))
    sizes = [pq.read_metadata(p).num_rows for p in sorted((tmp_path / "trials" / "sweep-s1").iterdir())]
    assert sizes == [2] * (EARLY_SEALED_PARTS + 1) + [1]


def test_rows_added_while_their_part_is_being_written_are_never_lost(tmp_path):
    """Writes race the flusher thread (interval 20 ms, tiny parts): a part filled while its
    previous version was being written is written again, whole (a dropped one lost rows)."""
    sink = ParquetSink(tmp_path, flush_interval_s=0.02, part_rows=7)
    for n in range(600):
        sink.write([trial(n)], [stage(n)] * (n % 3))
    sink.close()
    assert sorted(on_disk(tmp_path)) == sorted(f"agentA/task{n}/0" for n in range(600))
    assert read_stages(tmp_path).num_rows == sum(n % 3 for n in range(600))
    assert all(pq.read_metadata(p).num_rows >= 7 for p in sorted((tmp_path / "trials" / "sweep-s1").iterdir())[:-1])


CHILD = """
import sys, time
from pathlib import Path
from reb_ray.results.parquet_sink import ParquetSink
from tests.results.runs import stage, trial
sink = ParquetSink(Path(sys.argv[1]), flush_interval_s=0.5)
for n in range(100000):
    sink.write([trial(n)], [stage(n)])
    print(n, flush=True)
    time.sleep(0.02)
"""


def test_sigkill_loses_at_most_the_last_interval_and_leaves_no_torn_file(slow_process, tmp_path):
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    returned: dict[int, float] = {}  # trial number -> when its write had returned
    try:
        for line in child.stdout:
            returned[int(line)] = time.monotonic()
            if len(returned) >= 60:
                break
    finally:
        killed = time.monotonic()
        child.send_signal(signal.SIGKILL)
        child.wait()
    for path in data_files(tmp_path):  # every visible file is a complete Parquet file
        assert pq.read_metadata(path).num_rows > 0
    got = sorted(int(t.split("/")[1][4:]) for t in read_trials(tmp_path)["trial_id"].to_pylist())
    assert got == list(range(len(got)))  # a prefix of what was written: no gaps, no duplicates
    old = [n for n, at in returned.items() if at < killed - 3.0]  # interval 0.5 s, margin for a loaded machine
    assert set(old) <= set(got)
    assert read_stages(tmp_path).num_rows >= len(old)


def test_f12_all_null_batch_then_typed_batch(tmp_path):
    """Field case F12 (also with every reader: tests/results/test_layout.py): an all-null batch
    never makes the column null-typed, whether it is flushed alone or with the typed rows."""
    for interval, out in ((0, tmp_path / "each"), (60, tmp_path / "together")):
        with ParquetSink(out, flush_interval_s=interval) as sink:
            sink.write([trial(n, c4_exit_code=None) for n in range(5)], [])
            sink.write([], [])
            sink.write([trial(n, c4_exit_code=0) for n in range(5, 10)], [])
        got = read_trials(out)
        assert got.num_rows == 10 and got.schema.field("c4_exit_code").type == pa.int64()
        assert got.column("c4_exit_code").null_count == 5
        assert not [f.name for f in got.schema if pa.types.is_null(f.type)]
        for path in data_files(out):  # every file on disk is typed, the index too
            assert not [f.name for f in pq.read_schema(path) if pa.types.is_null(f.type)]


def test_empty_write_writes_nothing(tmp_path):
    assert ParquetSink(tmp_path).write([], []) == []
    assert not (tmp_path / "trials").exists() and not (tmp_path / "stages").exists()
    assert read_trials(tmp_path).num_rows == 0
    assert read_trials(tmp_path).schema.equals(TRIALS_SCHEMA)
    assert read_stages(tmp_path / "nowhere").schema.equals(STAGES_SCHEMA)
    assert scored_trial_ids(tmp_path, "s1") == set()


def test_temp_files_live_outside_the_datasets_and_stray_ones_are_ignored(tmp_path):
    with ParquetSink(tmp_path) as sink:
        sink.write([trial(1)], [stage(1)])
    assert all(p.name.startswith("part-") and p.name.endswith(".parquet") for p in data_files(tmp_path))
    assert not list((tmp_path / ".reb-ray" / "tmp").iterdir())
    sweep_dir = tmp_path / "trials" / "sweep-s1"
    # what a foreign writer's crash might leave: torn content under a temp or hidden name
    (sweep_dir / "part-x.parquet.tmp").write_bytes(b"PAR1 torn")
    (sweep_dir / ".part-x.parquet").write_bytes(b"PAR1 torn")
    (tmp_path / ".reb-ray" / "tmp" / "part-y.parquet.1.abc.tmp").write_bytes(b"PAR1 torn")
    assert read_trials(tmp_path)["trial_id"].to_pylist() == ["agentA/task1/0"]


def test_a_failed_flush_raises_and_keeps_the_rows_for_the_next(tmp_path):
    sink = ParquetSink(tmp_path, flush_interval_s=0)
    sink.write([trial(1)], [])
    blocker = tmp_path / "stages"
    blocker.write_text("not a directory")  # the stages part cannot be written
    with pytest.raises(OSError):
        sink.write([trial(2)], [stage(2)])
    blocker.unlink()
    sink.close()
    assert sorted(read_trials(tmp_path)["trial_id"].to_pylist()) == ["agentA/task1/0", "agentA/task2/0"]
    assert read_stages(tmp_path)["trial_id"].to_pylist() == ["agentA/task2/0"]


def test_unknown_key_raises_and_writes_nothing(tmp_path):
    sink = ParquetSink(tmp_path)
    with pytest.raises(ValueError, match="c9_bogus"):
        sink.write([trial(1, c9_bogus=1)], [])
    with pytest.raises(ValueError, match="stage_bogus"):
        sink.write([trial(1)], [stage(1, stage_bogus="x")])
    sink.close()
    assert data_files(tmp_path) == []  # validation happens before anything is buffered
    with pytest.raises(ValueError, match="c9_bogus"):
        rows_to_table([trial(1, c9_bogus=1)], TRIALS_SCHEMA)


def test_bad_rows_and_settings_raise_value_error(tmp_path):
    sink = ParquetSink(tmp_path)
    with pytest.raises(ValueError, match="sweep_id"):
        sink.write([trial(1, sweep_id=None)], [])
    with pytest.raises(ValueError, match="attempt"):
        sink.write([trial(1, attempt=None)], [])
    with pytest.raises(ValueError):
        sink.write([trial(1, c0_missing="many")], [])
    with pytest.raises(ValueError, match="schema_version"):
        sink.write([trial(1, schema_version=SCHEMA_VERSION + 1)], [])
    with pytest.raises(ValueError, match="part_rows=0"):
        ParquetSink(tmp_path, part_rows=0)


def test_scored_trial_ids_ignores_infra_error(tmp_path):
    with ParquetSink(tmp_path) as sink:
        sink.write([trial(1, status="infra_error", attempt=1)], [])
        sink.write([trial(1, status="scored", attempt=2)], [])
        sink.write([trial(2, status="infra_error")], [])
        sink.write([trial(3, status="interrupted")], [])
        sink.write([trial(4, status="scored")], [])
        sink.write([trial(5, status="scored", sweep="other")], [])
    assert scored_trial_ids(tmp_path, "s1") == {"agentA/task1/0", "agentA/task4/0"}
    assert scored_trial_ids(tmp_path, "other") == {"agentA/task5/0"}
    assert scored_trial_ids(tmp_path, "absent") == set()


def test_two_sweeps_go_to_separate_directories(tmp_path):
    with ParquetSink(tmp_path) as sink:
        written = sink.write([trial(1, sweep="s1"), trial(2, sweep="s2/b")], [stage(1, sweep="s1")])
        assert len(written) == 3
        sink.write([trial(3, sweep="s1")], [])
    assert sorted(p.name for p in (tmp_path / "trials").iterdir()) == ["sweep-s1", "sweep-s2%2Fb"]
    assert sorted(read_trials(tmp_path, "s1")["trial_id"].to_pylist()) == ["agentA/task1/0", "agentA/task3/0"]
    assert read_trials(tmp_path, "s2/b")["trial_id"].to_pylist() == ["agentA/task2/0"]
    assert read_trials(tmp_path).num_rows == 3
    assert read_stages(tmp_path, "s2/b").num_rows == 0 and read_stages(tmp_path, "s1").num_rows == 1
    # plain pyarrow filters by the stored column; no partition column to clash with it
    plain = ds.dataset(tmp_path / "trials", format="parquet")
    assert plain.to_table(filter=ds.field("sweep_id") == "s2/b").num_rows == 1


def test_foreign_or_corrupt_file_raises_one_line_naming_it(tmp_path):
    with ParquetSink(tmp_path) as sink:
        sink.write([trial(1)], [])
    sweep_dir = tmp_path / "trials" / "sweep-s1"
    cases = [
        ("part-foreign.parquet", lambda p: pq.write_table(pa.table({"sweep_id": ["s1"], "c0_missing": ["three"]}), p), "c0_missing"),
        ("part-extra.parquet", lambda p: pq.write_table(pa.table({"sweep_id": ["s1"], "surprise": [1]}), p), "surprise"),
        ("part-stage.parquet", lambda p: pq.write_table(STAGES_SCHEMA.empty_table(), p), "stages"),
        ("part-corrupt.parquet", lambda p: p.write_bytes(b"not parquet at all"), "unreadable"),
    ]
    for name, make, needle in cases:
        path = sweep_dir / name
        make(path)
        with pytest.raises(RebRayError) as info:
            read_trials(tmp_path)
        message = str(info.value)
        assert str(path) in message and needle in message and "\n" not in message
        path.unlink()
    assert read_trials(tmp_path).num_rows == 1


def test_legacy_layout_and_older_files_missing_trailing_columns_read(tmp_path):
    """A run written before issue 12 (one file per attempt under sweep_id=<id>/) still reads,
    with columns its files lack as nulls; new rows of the same sweep read with it."""
    write_legacy(tmp_path, [trial(1), trial(2, status="infra_error")], [stage(1)])
    older = pa.schema(list(TRIALS_SCHEMA)[:-2], metadata=TRIALS_SCHEMA.metadata)
    pq.write_table(pa.Table.from_pylist([{**trial(3), "schema_version": 1}], schema=older),
                   tmp_path / "trials" / "sweep_id=s1" / "part-old-a1.parquet")
    with ParquetSink(tmp_path) as sink:
        sink.write([trial(2, attempt=2)], [stage(2, attempt=2)])
    got = read_trials(tmp_path, "s1")
    assert got.schema.equals(TRIALS_SCHEMA) and got.num_rows == 4
    assert got.column(TRIALS_SCHEMA.names[-1]).null_count == 4
    assert scored_trial_ids(tmp_path, "s1") == {"agentA/task1/0", "agentA/task2/0", "agentA/task3/0"}
    assert read_stages(tmp_path, "s1").num_rows == 2


def _write_some(args: tuple[str, int]) -> None:
    out, worker = args
    sink = ParquetSink(Path(out), flush_interval_s=0.05)
    for n in range(worker * 10, worker * 10 + 10):
        sink.write([trial(n)], [stage(n), stage(n, stage="c0")])
    # not closed: the process exits and the sink is flushed at exit


def test_concurrent_processes_writing_different_trials(slow_process, tmp_path):
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(4) as pool:
        pool.map(_write_some, [(str(tmp_path), w) for w in range(4)])
    assert scored_trial_ids(tmp_path, "s1") == {f"agentA/task{n}/0" for n in range(40)}
    assert read_trials(tmp_path).num_rows == 40 and read_stages(tmp_path).num_rows == 80
    assert not list((tmp_path / ".reb-ray" / "tmp").iterdir())
    assert len(list((tmp_path / "trials" / "sweep-s1").iterdir())) == 4  # one part per writer


def test_rows_become_tables_of_the_schemas():
    empty = rows_to_table([], TRIALS_SCHEMA)
    assert empty.schema.equals(TRIALS_SCHEMA) and empty.num_rows == 0
    trials = rows_to_table([trial(n, c1_exit_code=None) for n in range(2)] + [trial(5, c1_exit_code=0)], TRIALS_SCHEMA)
    assert trials.num_rows == 3
    assert trials.schema.field("c1_exit_code").type == pa.int64()
    assert trials.column("c1_exit_code").to_pylist() == [None, None, 0]
    assert trials.column("schema_version").to_pylist() == [SCHEMA_VERSION] * 3
    stages = rows_to_table([stage(1)], STAGES_SCHEMA)
    assert stages.num_rows == 1 and stages.schema.equals(STAGES_SCHEMA)


def test_an_unclosed_sink_is_flushed_when_the_process_exits(tmp_path):
    code = ("from pathlib import Path; from reb_ray.results.parquet_sink import ParquetSink; "
            "from tests.results.runs import trial; import sys\n"
            "s = ParquetSink(Path(sys.argv[1]), flush_interval_s=600)\n"
            "for n in range(3): s.write([trial(n)], [])\n")
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=ROOT, check=True, timeout=120)
    assert sorted(on_disk(tmp_path)) == [f"agentA/task{n}/0" for n in range(3)]
    assert os.listdir(tmp_path / ".reb-ray" / "tmp") == []
