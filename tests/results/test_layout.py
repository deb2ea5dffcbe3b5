"""The layout reads directly with pyarrow.dataset, pandas, polars and duckdb, and they agree
with reb-ray's own readers (issue 12 item 3), before and after compaction; field case F12."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from reb_ray.results.compact import compact
from reb_ray.results.layout import sweep_dir, sweep_of
from reb_ray.results.parquet_sink import ParquetSink
from reb_ray.results.read import read_stages, read_trials
from reb_ray.results.schema import STAGES_SCHEMA, TRIALS_SCHEMA
from tests.results.runs import rich_stages, rich_trial, sorted_rows


def _value(kind: pa.DataType, n: int):
    if pa.types.is_string(kind):
        return f"v{n}"
    if pa.types.is_integer(kind):
        return n
    if pa.types.is_floating(kind):
        return n + 0.5
    if pa.types.is_boolean(kind):
        return n % 2 == 0
    if pa.types.is_timestamp(kind):
        return dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=n)
    if pa.types.is_list(kind):
        return [_value(kind.value_type, n), _value(kind.value_type, n + 1)]
    if pa.types.is_struct(kind):
        return {f.name: _value(f.type, n) for f in kind}
    raise AssertionError(f"no test value for {kind}")


def every_column(schema: pa.Schema, n: int, sweep: str) -> dict:
    """A row with every column of `schema` set (so every type goes through every reader)."""
    row = {f.name: _value(f.type, n) for f in schema if f.name != "schema_version"}
    return {**row, "sweep_id": sweep, "trial_id": f"full/t{n}/0", "attempt": 1}


def write_run(out: Path) -> None:
    with ParquetSink(out, part_rows=7, flush_interval_s=0) as sink:
        for n in range(40):
            sweep = "s1" if n % 4 else "sweep two/b"
            sink.write([rich_trial(n, sweep)], rich_stages(n, sweep))
        sink.write([every_column(TRIALS_SCHEMA, 1, "s1")], [every_column(STAGES_SCHEMA, 2, "s1")])


def _arrow(relation) -> pa.Table:
    result = relation.arrow()  # a Table before duckdb 1.4, a RecordBatchReader since
    return result.read_all() if isinstance(result, pa.RecordBatchReader) else result


def four_readers(root: Path) -> dict[str, list[dict]]:
    """The dataset directory `root` as each library reads it with its plainest call."""
    glob = f"{root}/**/*.parquet"
    return {
        "pyarrow": sorted_rows(ds.dataset(root, format="parquet").to_table()),
        "pandas": sorted_rows(pa.Table.from_pandas(pd.read_parquet(root, dtype_backend="pyarrow"), preserve_index=False)),
        "polars": sorted_rows(pl.read_parquet(root).to_arrow()),
        "duckdb": sorted_rows(_arrow(duckdb.sql(f"SELECT * FROM read_parquet('{glob}')"))),
    }


@pytest.mark.parametrize("compacted", [False, True], ids=["rolled parts", "compacted"])
def test_four_readers_agree_with_reb_ray(tmp_path, compacted):
    write_run(tmp_path)
    if compacted:
        compact(tmp_path)
    for dataset, ours in (("trials", read_trials(tmp_path)), ("stages", read_stages(tmp_path))):
        expected = sorted_rows(ours)
        assert len(expected) == (41 if dataset == "trials" else 121)
        for reader, rows in four_readers(tmp_path / dataset).items():
            assert rows == expected, f"{reader} reads {dataset} differently"
    # pandas with its default types reads it too (before issue 12 it failed: partition column clash)
    frame = pd.read_parquet(tmp_path / "trials")
    assert len(frame) == 41 and frame["sweep_id"].nunique() == 2


def test_f12_all_null_column_with_every_reader(tmp_path):
    """Field case F12: 5 rows with C4 exit code null, an empty batch, 5 rows with exit code 0.
    Written with one explicit schema; every reader reads 10 rows, the column int64 with 5 nulls,
    and no column null-typed anywhere (compacted or not)."""
    with ParquetSink(tmp_path, flush_interval_s=0) as sink:
        sink.write([rich_trial(n) | {"c4_exit_code": None} for n in range(5)], [])
        sink.write([], [])
        sink.write([rich_trial(n) | {"c4_exit_code": 0} for n in range(5, 10)], [])
    for stage in ("rolled", "compacted"):
        if stage == "compacted":
            compact(tmp_path)
        root = tmp_path / "trials"
        arrow = ds.dataset(root, format="parquet").to_table()
        assert arrow.num_rows == 10 and arrow.schema.field("c4_exit_code").type == pa.int64()
        assert arrow["c4_exit_code"].null_count == 5
        assert not [f.name for f in arrow.schema if pa.types.is_null(f.type)]
        frame = pd.read_parquet(root, dtype_backend="numpy_nullable")
        assert len(frame) == 10 and str(frame["c4_exit_code"].dtype) == "Int64"
        assert frame["c4_exit_code"].isna().sum() == 5
        polars = pl.read_parquet(root)
        assert polars.height == 10 and polars.schema["c4_exit_code"] == pl.Int64
        assert polars["c4_exit_code"].null_count() == 5 and pl.Null not in polars.schema.values()
        rows = duckdb.sql(f"SELECT typeof(c4_exit_code), count(*), count(c4_exit_code) FROM read_parquet('{root}/**/*.parquet') GROUP BY 1").fetchall()
        assert rows == [("BIGINT", 10, 5)]
        types = {t for _, t, *_ in duckdb.sql(f"DESCRIBE SELECT * FROM read_parquet('{root}/**/*.parquet')").fetchall()}
        assert '"NULL"' not in types and "NULL" not in types
        ours = read_trials(tmp_path)
        assert ours.num_rows == 10 and ours["c4_exit_code"].null_count == 5


@pytest.mark.parametrize("sweep_id", ["s1", "a/b", "x=y", ".hidden", "_under", "sp ace*?[]", "ünï"])
def test_sweep_directory_names_are_plain(tmp_path, sweep_id):
    """No sweep id gives a hidden name, a path separator, a glob character or a key=value
    segment a reader would take for a hive partition; the id round-trips."""
    path = sweep_dir(tmp_path / "trials", sweep_id)
    assert path.parent == tmp_path / "trials" and sweep_of(path) == sweep_id
    assert path.name.startswith("sweep-") and not set(path.name) & set("/=*?[] ")
