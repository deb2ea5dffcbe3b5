"""Write `trials` and `stages` rows as atomic, uniquely named Parquet shards.

Layout under the output directory (hive style, one directory per sweep)::

    <output_dir>/trials/sweep_id=<id>/part-<trial_id>-a<attempt>.parquet
    <output_dir>/stages/sweep_id=<id>/part-<trial_id>-a<attempt>.parquet

The sweep directory value is URI-encoded (as pyarrow's hive partitioning expects), and every
file still holds `sweep_id` as an ordinary column, so readers use the files alone
(`reb_ray.results.read`) and need no partition discovery. Each shard is written to a hidden
temporary name in its final directory, fsynced and renamed into place with `os.replace`, so a
reader never sees a torn file and a crash leaves at most a hidden temp file that readers ignore.
"""

from __future__ import annotations

import hashlib
import os
import re
import uuid
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq

from reb_ray.results.schema import SCHEMA_VERSION, STAGES_SCHEMA, TRIALS_SCHEMA

TRIALS_DIR = "trials"
STAGES_DIR = "stages"
SHARD_PREFIX = "part-"
SHARD_SUFFIX = ".parquet"
TEMP_PREFIX = "."  # temp files are hidden; readers only read visible `part-*.parquet` files
TEMP_SUFFIX = ".tmp"

_MAX_NAME_CHARS = 120
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def rows_to_table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    """Convert row dicts to a table of exactly `schema`, filling `schema_version`.

    A key missing from a row becomes null; a null or absent `schema_version` becomes
    SCHEMA_VERSION. Raises ValueError naming the key when a row has a key that is not a column
    of `schema`, when a row's `schema_version` differs from SCHEMA_VERSION, or when a value
    cannot be converted to its column's type. An empty `rows` gives an empty table of `schema`.
    """
    names = set(schema.names)
    filled: list[dict] = []
    for i, row in enumerate(rows):
        unknown = sorted(k for k in row if k not in names)
        if unknown:
            dataset = (schema.metadata or {}).get(b"reb_ray.dataset", b"?").decode()
            raise ValueError(
                f"row {i}: unknown key {unknown[0]!r} for the {dataset} schema"
                + (f" (also {', '.join(map(repr, unknown[1:]))})" if len(unknown) > 1 else "")
            )
        version = row.get("schema_version")
        if version is not None and version != SCHEMA_VERSION:
            raise ValueError(
                f"row {i}: schema_version {version!r} differs from this writer's {SCHEMA_VERSION}"
            )
        filled.append({**row, "schema_version": SCHEMA_VERSION})
    try:
        return pa.Table.from_pylist(filled, schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise ValueError(f"cannot convert rows to the schema: {exc}") from exc


def sweep_dir_name(sweep_id: str) -> str:
    """Directory name of one sweep's partition: `sweep_id=<URI-encoded id>`."""
    return f"sweep_id={quote(sweep_id, safe='')}"


def shard_name(keys: Iterable[tuple[str, int]]) -> str:
    """Deterministic shard file name for the (trial_id, attempt) keys a shard holds.

    One key gives `part-<sanitised trial_id>-a<attempt>.parquet`; characters outside
    `[A-Za-z0-9._-]` become `_`, and when that (or truncation of a long id) changed the id an
    8-hex-digit hash of the raw id is appended to the id part so distinct ids never share a
    name. Several keys give `part-multi-<16 hex digits of a hash of the sorted keys>-n<count>
    .parquet`. Raises ValueError when `keys` is empty.
    """
    unique = sorted(set(keys))
    if not unique:
        raise ValueError("a shard needs at least one (trial_id, attempt) key")
    if len(unique) == 1:
        trial_id, attempt = unique[0]
        safe = _UNSAFE.sub("_", trial_id)[:_MAX_NAME_CHARS]
        if safe != trial_id or not safe:
            safe += "-" + hashlib.sha256(trial_id.encode()).hexdigest()[:8]
        return f"{SHARD_PREFIX}{safe}-a{attempt}{SHARD_SUFFIX}"
    digest = hashlib.sha256(repr(unique).encode()).hexdigest()[:16]
    return f"{SHARD_PREFIX}multi-{digest}-n{len(unique)}{SHARD_SUFFIX}"


def write_shard_atomic(table: pa.Table, path: Path) -> None:
    """Write `table` to `path` as Parquet atomically: hidden temp file, fsync, os.replace.

    The temp name is unique per process and call, in the same directory as `path`, so
    concurrent writers never share a temp file; a failed write removes its temp file. An
    existing file at `path` is replaced whole. Raises OSError / pyarrow errors from the write.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{TEMP_PREFIX}{path.name}.{os.getpid()}.{uuid.uuid4().hex}{TEMP_SUFFIX}")
    try:
        with open(tmp, "wb") as f:
            pq.write_table(table, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    """Make a rename in `directory` durable; best effort where directories cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _group_by_sweep(rows: list[dict], dataset: str) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = {}
    for i, row in enumerate(rows):
        sweep_id = row.get("sweep_id")
        if not isinstance(sweep_id, str) or not sweep_id:
            raise ValueError(
                f"{dataset} row {i}: sweep_id must be a non-empty string, got {sweep_id!r}"
            )
        for key in ("trial_id", "attempt"):
            if row.get(key) is None:
                raise ValueError(f"{dataset} row {i}: {key} is required to name the shard")
        groups.setdefault(sweep_id, []).append(row)
    return groups


class ParquetSink:
    """Appends rows to the `trials` and `stages` Parquet datasets under `output_dir`.

    Each `write` call stores each non-empty row list as one shard per sweep, named from the
    (trial_id, attempt) keys it holds (see `shard_name`), so writing the same attempt again
    replaces its shard instead of duplicating rows, and workers writing different trials never
    touch the same file. Write all rows of one attempt in one call: a second call for the same
    single (trial_id, attempt) replaces the first call's shard.
    """

    def __init__(self, output_dir: Path) -> None:
        """Use `output_dir` (created on the first write) as the results root."""
        self.output_dir = Path(output_dir)

    @property
    def trials_dir(self) -> Path:
        """Root of the `trials` dataset."""
        return self.output_dir / TRIALS_DIR

    @property
    def stages_dir(self) -> Path:
        """Root of the `stages` dataset."""
        return self.output_dir / STAGES_DIR

    def write(self, trial_rows: list[dict], stage_rows: list[dict]) -> list[Path]:
        """Write trial rows (TRIALS_SCHEMA) and stage rows (STAGES_SCHEMA) as atomic shards.

        Both lists are validated and converted before anything is written. Every row needs a
        non-empty string `sweep_id`, a `trial_id` and an `attempt`; other missing keys are
        null. Returns the shard paths written (none for empty lists). Raises ValueError for an
        unknown key, a missing key column or an unconvertible value, and OSError on I/O failure.
        """
        planned: list[tuple[pa.Table, Path]] = []
        for rows, schema, root, dataset in (
            (trial_rows, TRIALS_SCHEMA, self.trials_dir, TRIALS_DIR),
            (stage_rows, STAGES_SCHEMA, self.stages_dir, STAGES_DIR),
        ):
            for sweep_id, group in _group_by_sweep(rows, dataset).items():
                table = rows_to_table(group, schema)
                name = shard_name((r["trial_id"], int(r["attempt"])) for r in group)
                planned.append((table, root / sweep_dir_name(sweep_id) / name))
        for table, path in planned:
            write_shard_atomic(table, path)
        return [path for _, path in planned]
