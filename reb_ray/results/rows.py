"""Row dicts to Arrow tables of the explicit schemas, validated (the sink's and MemorySink's input)."""

from __future__ import annotations

from functools import lru_cache

import pyarrow as pa
import pyarrow.compute as pc

from reb_ray.results.schema import SCHEMA_VERSION

_CONVERSION_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError)


def rows_to_table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    """Convert row dicts to a table of exactly `schema`, filling `schema_version`.

    A key missing from a row becomes null; a null or absent `schema_version` becomes
    SCHEMA_VERSION. Raises ValueError naming the key when a row has a key that is not a column
    of `schema`, when a row's `schema_version` differs from SCHEMA_VERSION, or when a value
    cannot be converted to its column's type. An empty `rows` gives an empty table of `schema`.

    The batch is checked once (the union of its keys) and converted in one pass of pyarrow's
    C++ converter over the rows (a struct array of the columns some row has), not one Python
    list per column: three times fewer Python operations per value (issue 12, sink throughput).
    """
    present = set().union(*rows)  # keys any row has; the other columns are all null
    names = _names(schema)
    if not names.issuperset(present):
        _raise_unknown(rows, schema, names)
    if "schema_version" in present:
        for i, row in enumerate(rows):
            version = row.get("schema_version")
            if version is not None and version != SCHEMA_VERSION:
                raise ValueError(f"row {i}: schema_version {version!r} differs from this writer's {SCHEMA_VERSION}")
    present.discard("schema_version")
    converted = _convert(rows, schema, frozenset(present))
    arrays = []
    for field in schema:
        name = field.name
        if name == "schema_version":
            arrays.append(pa.repeat(pa.scalar(SCHEMA_VERSION, field.type), len(rows)))
        elif name in present:
            arrays.append(converted[name])
        else:  # typed nulls, never a null-typed column (F12)
            arrays.append(pa.nulls(len(rows), field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


@lru_cache(maxsize=8)
def _names(schema: pa.Schema) -> frozenset:
    return frozenset(schema.names)


@lru_cache(maxsize=256)
def _struct_type(schema: pa.Schema, present: frozenset) -> pa.DataType:
    """The struct of the columns in `present`, in schema order. A tz-aware timestamp field is
    converted as a naive one (the same UTC microseconds, 2.4x faster in pyarrow 26, where each
    aware value costs a utcoffset call) and relabelled in `_convert`."""
    fields = []
    for field in schema:
        if field.name in present:
            tz = pa.types.is_timestamp(field.type) and field.type.tz is not None
            fields.append(field.with_type(pa.timestamp(field.type.unit)) if tz else field)
    return pa.struct(fields)


def _convert(rows: list[dict], schema: pa.Schema, present: frozenset) -> dict[str, pa.Array | pa.ChunkedArray]:
    """The `present` columns of `rows`, each as an array of its schema type; ValueError names
    the first bad value (found column by column, only once the one-pass conversion failed)."""
    if not present:
        return {}
    struct = _struct_type(schema, present)
    try:
        converted = pa.array(rows, type=struct)
    except _CONVERSION_ERRORS:
        return {name: _column(rows, schema.field(name)) for name in schema.names if name in present}
    table = pa.Table.from_struct_array(converted)
    columns = {}
    for field in struct:
        name, column = field.name, table[field.name]
        target = schema.field(name).type
        columns[name] = column.cast(target) if column.type != target else column  # naive -> UTC: a relabel
    return columns


def _raise_unknown(rows: list[dict], schema: pa.Schema, names: frozenset) -> None:
    for i, row in enumerate(rows):
        if not names.issuperset(row):
            unknown = sorted((k for k in row if k not in names), key=str)
            dataset = (schema.metadata or {}).get(b"reb_ray.dataset", b"?").decode()
            raise ValueError(
                f"row {i}: unknown key {unknown[0]!r} for the {dataset} schema"
                + (f" (also {', '.join(map(repr, unknown[1:]))})" if len(unknown) > 1 else "")
            )


def _column(rows: list[dict], field: pa.Field) -> pa.Array:
    """One column's values as an array of its type; ValueError names the first bad value."""
    name = field.name  # bound once: Field.name builds a new str on every access
    try:
        return pa.array([row.get(name) for row in rows], type=field.type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
        for i, row in enumerate(rows):
            try:
                pa.array([row.get(name)], type=field.type)
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as inner:
                raise ValueError(f"cannot convert rows to the schema: row {i}, column {name!r} ({field.type}):"
                                 f" {row.get(name)!r}: {inner}") from exc
        raise ValueError(f"cannot convert rows to the schema: column {name!r}: {exc}") from exc


def split_by_sweep(table: pa.Table, rows: list[dict], dataset: str) -> list[tuple[str, pa.Table]]:
    """(sweep_id, its rows) of a converted batch, in first-seen order. Raises ValueError naming
    the first row without a non-empty string sweep_id, a trial_id or an attempt."""
    sweep = table["sweep_id"]
    bad = pc.fill_null(pc.equal(pc.utf8_length(sweep), 0), True)
    if pc.any(bad).as_py():
        i = pc.index(bad, True).as_py()
        raise ValueError(f"{dataset} row {i}: sweep_id must be a non-empty string, got {rows[i].get('sweep_id')!r}")
    for key in ("trial_id", "attempt"):
        if table[key].null_count:
            i = pc.index(pc.is_null(table[key]), True).as_py()
            raise ValueError(f"{dataset} row {i}: {key} is required")
    sweeps = pc.unique(sweep).to_pylist()
    if len(sweeps) == 1:
        return [(sweeps[0], table)]
    return [(s, table.filter(pc.equal(sweep, s))) for s in sweeps]
