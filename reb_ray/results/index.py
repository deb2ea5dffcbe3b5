"""The resume index: per attempt only what resume needs, so resume never reads whole rows.

    <output>/index/sweep-<id>/<name>   for every trials part <output>/trials/sweep-<id>/<name>

An index file holds the INDEX_COLUMNS of exactly the rows of the trials part of the same name,
and records in its footer (`reb_ray.covers`) the size and mtime (ns) of the trials file version
it describes. The sink writes it right after each trials part (reb_ray.results.parquet_sink)
and compaction writes one per output file. A crash between the two writes, a copy that did not
keep mtimes, or a run in the legacy layout leaves a trials part without a matching index file:
`read_index` then reads those parts' few key columns instead, so the index is only ever a
shortcut and never a second truth. Which attempt counts stays `read.latest_attempts`' rule.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from reb_ray.results.layout import INDEX_DIR, SWEEP_PREFIX, TRIALS_DIR, part_files
from reb_ray.results.scan import scan
from reb_ray.results.schema import SCHEMA_VERSION, TRIALS_SCHEMA

INDEX_COLUMNS = ["sweep_id", "trial_id", "attempt", "status", "failure_owner"]
INDEX_SCHEMA = pa.schema(
    [TRIALS_SCHEMA.field(name) for name in INDEX_COLUMNS],
    metadata={"reb_ray.dataset": "index", "reb_ray.schema_version": str(SCHEMA_VERSION)},
)
COVERS_KEY = b"reb_ray.covers"


def covers(stat: os.stat_result) -> str:
    """The identity of one trials file version: `<size in bytes>:<mtime in ns>`."""
    return f"{stat.st_size}:{stat.st_mtime_ns}"


def index_table(trials: pa.Table, trials_stat: os.stat_result) -> pa.Table:
    """The index rows (INDEX_SCHEMA) of a trials part's rows, tagged as covering the file
    whose stat is `trials_stat`."""
    metadata = {**INDEX_SCHEMA.metadata, COVERS_KEY: covers(trials_stat).encode()}
    return trials.select(INDEX_COLUMNS).cast(INDEX_SCHEMA).replace_schema_metadata(metadata)


def index_path(output_dir: Path, trials_part: Path) -> Path | None:
    """Where the index file of trials part `trials_part` lives, or None for a part with none
    (a legacy-layout shard, or a file outside a sweep directory)."""
    sweep_dir = Path(trials_part).parent
    if not sweep_dir.name.startswith(SWEEP_PREFIX) or sweep_dir.parent.name != TRIALS_DIR:
        return None
    return Path(output_dir) / INDEX_DIR / sweep_dir.name / Path(trials_part).name


def read_fresh_index(path: Path | None, trials_stat: os.stat_result) -> pa.Table | None:
    """The index file at `path` (INDEX_SCHEMA) if it covers exactly the trials file version
    `trials_stat`; None when it is missing, unreadable or stale."""
    if path is None:
        return None
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException):  # missing, or torn by a foreign writer: read the part itself
        return None
    if (table.schema.metadata or {}).get(COVERS_KEY) != covers(trials_stat).encode():
        return None
    if table.schema.remove_metadata() != INDEX_SCHEMA.remove_metadata():
        return None
    return table.replace_schema_metadata(INDEX_SCHEMA.metadata)


def read_index(output_dir: Path, sweep_id: str, attempts: int = 3) -> pa.Table:
    """Every recorded attempt of sweep `sweep_id` under `output_dir` as INDEX_SCHEMA rows (one
    per trials row), in the trials dataset's file order.

    Reads the index file of each trials part when it covers that part's current version, else
    the part's INDEX_COLUMNS. Retries (up to `attempts` listings) when a compaction swaps files
    meanwhile. Raises RebRayError (one line naming the file) for an unreadable or foreign
    trials file, like read_trials.
    """
    output_dir = Path(output_dir)
    for attempt in range(attempts):
        try:
            return _read_index_once(output_dir, sweep_id)
        except FileNotFoundError:
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def _read_index_once(output_dir: Path, sweep_id: str) -> pa.Table:
    tables: list[pa.Table] = []
    unindexed: list[Path] = []
    first_unindexed = 0
    for part in part_files(output_dir / TRIALS_DIR, sweep_id):
        found = read_fresh_index(index_path(output_dir, part), part.stat())
        if found is not None:
            tables.append(found)
            continue
        if not unindexed:
            first_unindexed = len(tables)
        unindexed.append(part)
    if unindexed:  # one scan for all of them (a legacy run has one file per attempt)
        scanned = scan(unindexed, TRIALS_SCHEMA, INDEX_COLUMNS, sweep_id).cast(INDEX_SCHEMA)
        tables.insert(first_unindexed, scanned)
    return pa.concat_tables(tables) if tables else INDEX_SCHEMA.empty_table()
