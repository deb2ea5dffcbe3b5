"""The resume index: written beside every trials part, trusted only for the version it covers."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from reb_ray.results.atomic import write_atomic
from reb_ray.results.compact import compact
from reb_ray.results.index import COVERS_KEY, INDEX_SCHEMA, read_index
from reb_ray.results.parquet_sink import ParquetSink, rows_to_table
from reb_ray.results.read import last_attempts, latest_attempts, read_trials, scored_trial_ids
from reb_ray.results.schema import TRIALS_SCHEMA
from tests.results.runs import trial, write_legacy


def _index_file(tmp_path):
    (path,) = (tmp_path / "index" / "sweep-s1").iterdir()
    return path


def test_index_mirrors_the_trials_part(tmp_path):
    with ParquetSink(tmp_path) as sink:
        for n in range(6):
            sink.write([trial(n, status="infra_error" if n % 2 else "scored", failure_owner="infra" if n % 2 else None)], [])
        sink.write([trial(1, attempt=2)], [])
    index = pq.read_table(_index_file(tmp_path))
    (part,) = (tmp_path / "trials" / "sweep-s1").iterdir()
    assert index.schema.names == INDEX_SCHEMA.names and part.name == _index_file(tmp_path).name
    assert index.num_rows == pq.read_metadata(part).num_rows == 7
    assert read_index(tmp_path, "s1").to_pylist() == read_trials(tmp_path).select(INDEX_SCHEMA.names).to_pylist()
    assert scored_trial_ids(tmp_path, "s1") == {f"agentA/task{n}/0" for n in (0, 1, 2, 4)}
    assert last_attempts(tmp_path, "s1") == {**{f"agentA/task{n}/0": 1 for n in range(6)}, "agentA/task1/0": 2}
    # the one rule for the latest attempt applies to index rows as to whole rows
    assert latest_attempts(read_index(tmp_path, "s1")).to_pylist() == \
        latest_attempts(read_trials(tmp_path)).select(INDEX_SCHEMA.names).to_pylist()


def test_resume_reads_the_index_not_the_rows(tmp_path):
    """An index file that covers its trials part is what resume reads: here one whose statuses
    were changed after the fact (the trials file untouched) decides what counts as scored."""
    with ParquetSink(tmp_path) as sink:
        sink.write([trial(n) for n in range(3)], [])
    path = _index_file(tmp_path)
    table = pq.read_table(path)
    doctored = table.set_column(table.schema.get_field_index("status"), "status",
                                pa.array(["infra_error"] * 3, pa.string()))
    pq.write_table(doctored, path)  # keeps the footer's covers tag, so it still counts as fresh
    assert scored_trial_ids(tmp_path, "s1") == set()
    assert pc.all(pc.equal(read_trials(tmp_path)["status"], "scored")).as_py()


def test_a_stale_or_missing_index_falls_back_to_the_trials_part(tmp_path):
    """A crash between a trials part's rewrite and its index's leaves the index one version
    behind; resume must then read the part itself, or it would reuse an attempt number."""
    with ParquetSink(tmp_path) as sink:
        sink.write([trial(1)], [])
    (part,) = (tmp_path / "trials" / "sweep-s1").iterdir()
    newer = rows_to_table([trial(1), trial(2), trial(1, attempt=2, status="infra_error")], TRIALS_SCHEMA)
    write_atomic(newer, part, tmp_path)  # the trials part moved on, its index did not
    assert pq.read_table(_index_file(tmp_path)).num_rows == 1
    assert last_attempts(tmp_path, "s1") == {"agentA/task1/0": 2, "agentA/task2/0": 1}
    assert scored_trial_ids(tmp_path, "s1") == {"agentA/task1/0", "agentA/task2/0"}
    _index_file(tmp_path).unlink()
    assert last_attempts(tmp_path, "s1") == {"agentA/task1/0": 2, "agentA/task2/0": 1}
    # compaction gives the part a fresh index again
    compact(tmp_path)
    assert (pq.read_table(_index_file(tmp_path)).schema.metadata or {}).get(COVERS_KEY)
    assert read_index(tmp_path, "s1").num_rows == 3


def test_a_legacy_run_resumes_without_an_index_and_gets_one_from_compact(tmp_path):
    write_legacy(tmp_path, [trial(1), trial(2, status="infra_error"), trial(2, attempt=2, status="infra_error")], [])
    assert not (tmp_path / "index").exists()
    assert scored_trial_ids(tmp_path, "s1") == {"agentA/task1/0"}
    assert last_attempts(tmp_path, "s1") == {"agentA/task1/0": 1, "agentA/task2/0": 2}
    compact(tmp_path)
    assert not (tmp_path / "trials" / "sweep_id=s1").exists()
    assert pq.read_table(_index_file(tmp_path)).num_rows == 3
    assert last_attempts(tmp_path, "s1") == {"agentA/task1/0": 1, "agentA/task2/0": 2}
