"""Row dicts to Arrow tables of the explicit schemas, validated (the sink's input)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache

import pyarrow as pa
import pyarrow.compute as pc

from reb_ray.results.schema import SCHEMA_VERSION

_CONVERSION_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError)
_SMALL = 16  # batches of at most this many rows reuse their all-null and version columns


@cache
def conversion_pool() -> pa.MemoryPool:
    """The memory pool row conversion allocates from: jemalloc's where this pyarrow has it and
    no pool was chosen with ARROW_DEFAULT_MEMORY_POOL, else the default. Measured (the results
    benchmark, 100,000 trials with 700,000 stage rows): the sink took 2.2-2.3 s with
    pyarrow 26's default mimalloc and 1.6-1.65 s with jemalloc for the converted arrays alone."""
    if os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        return pa.default_memory_pool()
    try:
        return pa.jemalloc_memory_pool()
    except NotImplementedError:  # pyarrow built without jemalloc (ArrowNotImplementedError)
        return pa.default_memory_pool()


def rows_to_table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    """Convert row dicts to a table of exactly `schema`, filling `schema_version`.

    A key missing from a row becomes null; a null or absent `schema_version` becomes
    SCHEMA_VERSION. Raises ValueError naming the key when a row has a key that is not a column
    of `schema`, when a row's `schema_version` differs from SCHEMA_VERSION, or when a value
    cannot be converted to its column's type. An empty `rows` gives an empty table of `schema`.

    The batch is checked once (the union of its keys, not each row) and converted in one pass
    of pyarrow's C++ converter over the rows (a struct of the columns some row has) rather than
    one Python list per column; the plan for a set of keys is made once (the conversion was
    two thirds of the sink's time).
    """
    present = set().union(*rows)  # keys any row has; the other columns are all null
    layout = _Layout.of(schema)
    if not layout.names.issuperset(present):
        _raise_unknown(rows, schema, layout.names)
    if "schema_version" in present:
        for i, row in enumerate(rows):
            version = row.get("schema_version")
            if version is not None and version != SCHEMA_VERSION:
                raise ValueError(f"row {i}: schema_version {version!r} differs from this writer's {SCHEMA_VERSION}")
        present.discard("schema_version")
    plan = layout.plan(frozenset(present))
    n = len(rows)
    converted = plan.convert(rows, schema)
    fill = plan.fill(n)
    arrays = [converted[i] if present_ else fill[i] for i, present_ in enumerate(plan.present)]
    return pa.Table.from_arrays(arrays, schema=schema)


@dataclass
class _Plan:
    """How to build a table of one schema from rows with one set of keys: which columns come
    from the rows (`present`, in schema order), the struct they are converted as, which of
    them need relabelling as UTC, and the all-null and version columns of small batches."""

    schema: pa.Schema
    present: list[bool]
    struct: pa.DataType | None
    relabel: dict[int, pa.DataType]  # index in the struct -> the schema's tz-aware type
    small: dict[int, list[pa.Array | None]]

    def convert(self, rows: list[dict], schema: pa.Schema) -> list:
        """The present columns as arrays of their schema types, at their schema index (None
        elsewhere); ValueError names the first bad value, found column by column only once the
        one-pass conversion failed."""
        out: list = [None] * len(self.present)
        if self.struct is None:
            return out
        indices = [i for i, p in enumerate(self.present) if p]
        try:
            children = pa.array(rows, type=self.struct, memory_pool=conversion_pool()).flatten()
        except _CONVERSION_ERRORS:
            for i in indices:
                out[i] = _column(rows, schema.field(i))
            return out
        for k, (i, child) in enumerate(zip(indices, children)):
            target = self.relabel.get(k)
            out[i] = child if target is None else child.cast(target)  # naive -> UTC: a relabel, no copy
        return out

    def fill(self, n: int) -> list[pa.Array | None]:
        """The version column and the all-null columns (typed, never null-typed: a
        null-typed column would clash with a later batch of values) for `n` rows."""
        cached = self.small.get(n)
        if cached is not None:
            return cached
        columns: list[pa.Array | None] = []
        for field, present in zip(self.schema, self.present):
            if present:
                columns.append(None)
            elif field.name == "schema_version":
                columns.append(pa.repeat(pa.scalar(SCHEMA_VERSION, field.type), n))
            else:
                columns.append(pa.nulls(n, field.type, memory_pool=conversion_pool()))
        if n <= _SMALL:
            self.small[n] = columns  # arrays are immutable: shared by every small batch
        return columns


class _Layout:
    """One schema's names and its plans by key set (schemas are module constants; a pyarrow
    Schema hashes its every field, so layouts are found by identity)."""

    _by_schema: dict[int, tuple[pa.Schema, _Layout]] = {}

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self.names = frozenset(schema.names)
        self._plans: dict[frozenset, _Plan] = {}

    @classmethod
    def of(cls, schema: pa.Schema) -> _Layout:
        found = cls._by_schema.get(id(schema))
        if found is None or found[0] is not schema:  # the schema is kept, so its id is never reused
            found = cls._by_schema[id(schema)] = (schema, cls(schema))
        return found[1]

    def plan(self, present: frozenset) -> _Plan:
        plan = self._plans.get(present)
        if plan is None:
            if len(self._plans) > 256:  # key sets are few in practice; never unbounded
                self._plans.clear()
            plan = self._plans[present] = self._make(present)
        return plan

    def _make(self, present: frozenset) -> _Plan:
        # A tz-aware timestamp converts as a naive one (the same UTC microseconds, 2.4x faster in
        # pyarrow 26, which calls utcoffset on each aware value) and is relabelled after.
        fields, relabel, flags = [], {}, []
        for field in self.schema:
            flags.append(field.name in present)
            if flags[-1]:
                if pa.types.is_timestamp(field.type) and field.type.tz is not None:
                    relabel[len(fields)] = field.type
                    field = field.with_type(pa.timestamp(field.type.unit))
                fields.append(field)
        return _Plan(self.schema, flags, pa.struct(fields) if fields else None, relabel, {})


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
        return pa.array([row.get(name) for row in rows], type=field.type, memory_pool=conversion_pool())
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
