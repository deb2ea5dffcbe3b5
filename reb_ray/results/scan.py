"""Read a list of result files as one table of an explicit schema, with one-line errors.

Every reader of reb-ray's datasets (reb_ray.results.read, the resume index, compaction) goes
through `scan`: each file's footer is checked against the schema first (a foreign dataset or a
foreign or retyped column is refused, naming the file), columns an older file lacks read as
null, and nothing is ever null-typed (an all-null batch keeps its column's type).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

if TYPE_CHECKING:  # imported where used (it loads pandas): `rows_of` and a bare import need none of it
    import pyarrow.dataset as ds

from reb_ray.errors import RebRayError


def one_line(exc: BaseException) -> str:
    """`exc`'s message on one line (its type name when it has none)."""
    return " ".join(str(exc).split()) or type(exc).__name__


def check_schema(path: Path, schema: pa.Schema) -> None:
    """Raise RebRayError naming `path` when its footer is unreadable, it is tagged as another
    dataset, or it has a column `schema` lacks or types differently (a null-typed column, as
    written by a version before explicit schemas, reads as the schema's type). A vanished file
    raises FileNotFoundError (a compaction swapped it; callers list again)."""
    try:
        found = pq.read_schema(path)
    except FileNotFoundError:
        raise
    except (OSError, pa.ArrowException) as exc:
        if not Path(path).exists():
            raise FileNotFoundError(str(path)) from exc
        raise RebRayError(f"unreadable results shard {path}: {one_line(exc)}") from exc
    wanted = (schema.metadata or {}).get(b"reb_ray.dataset")
    tagged = (found.metadata or {}).get(b"reb_ray.dataset")
    if tagged is not None and tagged != wanted:
        raise RebRayError(
            f"results shard {path} belongs to dataset {tagged.decode()!r}, not {(wanted or b'?').decode()!r};"
            " move or delete it"
        )
    for field in found:
        index = schema.get_field_index(field.name)
        if index < 0:
            raise RebRayError(
                f"results shard {path} has foreign column {field.name!r}; it was not written"
                " by this reb-ray version: move or delete it"
            )
        expected = schema.field(index).type
        if field.type != expected and not pa.types.is_null(field.type):
            raise RebRayError(
                f"results shard {path} has column {field.name!r} of type {field.type},"
                f" expected {expected}; move or delete it"
            )


def _dataset(files: list[Path], schema: pa.Schema) -> ds.Dataset:
    import pyarrow.dataset as ds

    for path in files:
        check_schema(path, schema)
    return ds.dataset([str(p) for p in files], schema=schema, format="parquet")


def _blame(files: list[Path], exc: BaseException, where: str) -> RebRayError:
    for path in files:  # find the file at fault so the message can name it
        try:
            pq.read_table(path)
        except FileNotFoundError:
            raise
        except (OSError, pa.ArrowException) as inner:
            return RebRayError(f"unreadable results shard {path}: {one_line(inner)}")
    return RebRayError(f"cannot read results under {where}: {one_line(exc)}")


def scan(files: list[Path], schema: pa.Schema, columns: list[str] | None = None,
         sweep_id: str | None = None) -> pa.Table:
    """The rows of `files` as one table of `schema` (or its `columns`), in file order, only
    sweep `sweep_id`'s when given. No files gives an empty table of the schema.

    Raises RebRayError (one line naming the file) for an unreadable or foreign file, and
    FileNotFoundError when a file vanished meanwhile (callers list again and retry)."""
    if not files:
        table = schema.empty_table()
        return table.select(columns) if columns is not None else table
    import pyarrow.dataset as ds

    dataset = _dataset(files, schema)
    flt = ds.field("sweep_id") == sweep_id if sweep_id is not None else None
    try:
        return dataset.to_table(columns=columns, filter=flt)
    except FileNotFoundError:
        raise
    except (OSError, pa.ArrowException) as exc:
        raise _blame(files, exc, str(Path(files[0]).parent.parent)) from exc


def conform(table: pa.Table, schema: pa.Schema, columns: list[str] | None = None) -> pa.Table:
    """`table` (read from one checked file) as `schema` (or its `columns`): a column the file
    lacks reads as null, a null-typed one as the schema's type, in the schema's order."""
    names = columns if columns is not None else schema.names
    arrays = []
    for name in names:
        field = schema.field(name)
        if name in table.column_names:
            column = table[name]
            arrays.append(column if column.type == field.type else column.cast(field.type))
        else:
            arrays.append(pa.nulls(table.num_rows, field.type))
    return pa.Table.from_arrays(arrays, schema=pa.schema([schema.field(n) for n in names], metadata=schema.metadata))


def rows_of(files: list[Path], schema: pa.Schema, key: str, value: str, columns: list[str] | None = None,
            sweep_id: str | None = None) -> pa.Table:
    """The rows of `files` whose column `key` equals `value` (only sweep `sweep_id`'s when
    given), as `scan` gives them. Reads the `key` column of each file, then only the row groups
    that hold a match: one trial out of 100,000 without decoding every row group's every
    column. Raises like `scan`."""
    import pyarrow.compute as pc

    parts = []
    for path in files:
        check_schema(path, schema)
        try:
            parquet = pq.ParquetFile(path)
            found = pc.equal(parquet.read(columns=[key])[key], value)
            if not pc.any(found).as_py():
                continue
            starts, at = [], 0
            for group in range(parquet.num_row_groups):
                starts.append(at)
                at += parquet.metadata.row_group(group).num_rows
            hits = pc.indices_nonzero(found).to_pylist()
            groups = sorted({max(g for g, start in enumerate(starts) if start <= i) for i in hits})
            table = parquet.read_row_groups(groups)
        except FileNotFoundError:
            raise
        except (OSError, pa.ArrowException) as exc:
            raise _blame([path], exc, str(path)) from exc
        keep = pc.equal(table[key], value)
        if sweep_id is not None:
            keep = pc.and_(keep, pc.equal(table["sweep_id"], sweep_id))
        parts.append(conform(table.filter(keep), schema, columns))
    if not parts:
        table = schema.empty_table()
        return table.select(columns) if columns is not None else table
    return pa.concat_tables(parts)


def batches(path: Path, schema: pa.Schema, batch_rows: int) -> Iterator[pa.Table]:
    """One file's rows as tables of `schema` of at most `batch_rows` rows each (bounded memory,
    for compaction). Raises like `scan`."""
    dataset = _dataset([path], schema)
    try:
        for batch in dataset.to_batches(batch_size=batch_rows, batch_readahead=1, fragment_readahead=1):
            if batch.num_rows:
                yield pa.Table.from_batches([batch], schema=schema)
    except FileNotFoundError:
        raise
    except (OSError, pa.ArrowException) as exc:
        raise _blame([path], exc, str(path)) from exc
