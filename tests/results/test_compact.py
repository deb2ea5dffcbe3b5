"""Compaction on real runs: few files after, the same rows, and crash safety at every step."""

from __future__ import annotations

import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from reb_ray.results.compact import compact, compact_if_idle, count_files
from reb_ray.results.index import read_index
from reb_ray.results.lock import RunBusy
from reb_ray.results.parquet_sink import ParquetSink, rows_to_table
from reb_ray.results.read import read_stages, read_trials
from reb_ray.results.schema import TRIALS_SCHEMA
from tests.results.runs import data_files, rich_stages, rich_trial, sorted_rows, write_legacy

ROOT = Path(__file__).resolve().parents[2]


def make_run(out: Path, trials: int = 30, part_rows: int = 5) -> Path:
    """A run with rolled parts of two sweeps plus legacy one-file-per-attempt shards in s1."""
    write_legacy(out, [rich_trial(n) for n in range(1000, 1003)], [s for n in range(1000, 1003) for s in rich_stages(n)])
    with ParquetSink(out, part_rows=part_rows, flush_interval_s=0) as sink:
        for n in range(trials):
            sweep = "s1" if n % 3 else "s2"
            sink.write([rich_trial(n, sweep)], rich_stages(n, sweep))
    return out


def snapshot(out: Path) -> dict:
    """Everything a reader can see, in a canonical order: whole rows and the resume index."""
    return {"trials": sorted_rows(read_trials(out)), "stages": sorted_rows(read_stages(out)),
            "index": {s: sorted_rows(read_index(out, s)) for s in ("s1", "s2")}}


def plain(out: Path, dataset: str) -> list[dict]:
    """The dataset as plain pyarrow reads the directory (what pandas, polars and duckdb see)."""
    return sorted_rows(ds.dataset(out / dataset, format="parquet").to_table())


def test_compaction_leaves_few_files_and_the_same_rows(tmp_path):
    out = make_run(tmp_path / "run")
    before = snapshot(out)
    files_before = len(data_files(out))
    assert files_before > 25
    result = compact(out)
    assert [s.sweep_id for s in result.sweeps] == ["s1", "s2"]
    assert [count_files(out, s) for s in ("s1", "s2")] == [3, 3]  # trials, stages, index
    assert len(data_files(out)) == 6 and result.files_after == 6 and result.files_before == files_before
    assert not (out / "trials" / "sweep_id=s1").exists() and not (out / "stages" / "sweep_id=s1").exists()
    assert snapshot(out) == before
    assert plain(out, "trials") == before["trials"] and plain(out, "stages") == before["stages"]
    assert "sweep s1:" in result.describe() and "-> 3 files" in result.describe()
    again = compact(out)  # nothing left to merge: nothing rewritten
    assert [s.rows for s in again.sweeps] == [{}, {}] and snapshot(out) == before


def test_big_files_stay_and_small_ones_merge(tmp_path):
    out = make_run(tmp_path / "run", trials=12, part_rows=100)
    compact(out, target_bytes=2_000)  # every compacted file counts as big next time
    big = set(data_files(out))
    with ParquetSink(out, part_rows=1, flush_interval_s=0) as sink:
        for n in range(100, 104):
            sink.write([rich_trial(n)], rich_stages(n))
    before = snapshot(out)
    compact(out, "s1", target_bytes=2_000)
    assert big <= set(data_files(out))  # kept as they were
    assert snapshot(out) == before


class Crash(BaseException):
    """Stands for the process dying at a step (no handler in compaction catches it after the
    temporary files are complete, so what is left on disk is what a crash leaves)."""


def _steps(out: Path) -> list[str]:
    names: list[str] = []
    probe = out.parent / "probe"
    shutil.copytree(out, probe)
    compact(probe, step=names.append)
    return names


def test_a_crash_at_any_step_loses_and_doubles_nothing(slow_process, tmp_path):
    original = make_run(tmp_path / "run", trials=9, part_rows=2)
    expected = snapshot(original)
    steps = _steps(original)
    assert steps[:2] == ["written", "committed"] and steps[-1] == "done" and len(steps) > 10
    for k, name in enumerate(steps):
        out = tmp_path / f"crash{k}"
        shutil.copytree(original, out)
        calls = iter(range(len(steps)))

        def die(step: str, k=k) -> None:
            if next(calls) == k:
                raise Crash(step)

        with pytest.raises(Crash):
            compact(out, step=die)
        assert snapshot(out) == expected, f"after a crash at step {k} ({name})"
        if name in ("written", "committed", "done"):  # not inside a swap: outside readers agree too
            assert plain(out, "trials") == expected["trials"] and plain(out, "stages") == expected["stages"]
        # the next writer finishes a committed compaction at its first write
        with ParquetSink(out) as sink:
            sink.write([rich_trial(5000)], [])
        assert not list((out / ".reb-ray" / "journal").glob("*.json"))
        with_new = sorted_rows(pa.Table.from_pylist(expected["trials"] + rows_to_table([rich_trial(5000)], TRIALS_SCHEMA).to_pylist(),
                                                    schema=TRIALS_SCHEMA))
        assert sorted_rows(read_trials(out)) == with_new
        assert plain(out, "trials") == with_new and plain(out, "stages") == expected["stages"]
        compact(out)
        assert plain(out, "trials") == with_new and snapshot(out)["stages"] == expected["stages"]
        assert list((out / ".reb-ray" / "tmp").iterdir()) == []
        assert len(data_files(out)) == 6


KILLER = """
import sys
from pathlib import Path
from reb_ray.results.compact import compact
print("start", flush=True)
compact(Path(sys.argv[1]))
"""


def test_sigkill_midway_then_compact_again(slow_process, tmp_path):
    """A real SIGKILL at a random moment inside a real compaction (three runs)."""
    original = make_run(tmp_path / "run", trials=120, part_rows=1)
    expected = snapshot(original)
    shutil.copytree(original, tmp_path / "timed")
    started = time.monotonic()
    compact(tmp_path / "timed")
    duration = time.monotonic() - started
    rng = random.Random(12)
    for attempt in range(3):
        out = tmp_path / f"kill{attempt}"
        shutil.copytree(original, out)
        child = subprocess.Popen([sys.executable, "-c", KILLER, str(out)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline() == "start\n"
        time.sleep(rng.uniform(0, duration))
        child.send_signal(signal.SIGKILL)
        child.wait()
        assert snapshot(out) == expected, f"killed in run {attempt}"
        compact(out)
        assert snapshot(out) == expected
        assert plain(out, "trials") == expected["trials"] and plain(out, "stages") == expected["stages"]
        assert len(data_files(out)) == 6


def test_compaction_waits_for_writers_and_a_sweep_end_skips_when_busy(tmp_path):
    out = make_run(tmp_path / "run", trials=4)
    sink = ParquetSink(out)
    sink.write([rich_trial(77)], [])  # holds the run lock shared until closed
    with pytest.raises(RunBusy, match="writing results there"):
        compact(out)
    assert compact_if_idle(out, "s1") is None
    sink.close()
    assert compact_if_idle(out, "s1").sweeps[0].files_after == 3
    assert compact_if_idle(out, "absent") is None


def test_bad_directories_raise_one_line(tmp_path):
    from reb_ray.errors import RebRayError

    with pytest.raises(RebRayError, match="no trials/ or stages/ dataset"):
        compact(tmp_path)
    make_run(tmp_path / "run", trials=2)
    with pytest.raises(RebRayError, match="no sweep 'nope' here; sweeps: s1, s2"):
        compact(tmp_path / "run", "nope")
