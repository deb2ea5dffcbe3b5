"""Compaction: merge a run's part files into a few, never losing or doubling a row.

A sink rewrites small parts at every flush; without compaction a long sweep leaves thousands
of small files, and every reader pays for each.

`compact(output_dir)` (`reb-ray compact RUN`, and every sweep at its end) rewrites, per sweep
and dataset, the small files (under half of `target_bytes` on disk, every legacy one-file-per-
attempt shard, and any trials part whose index file is missing or stale) in file order into
files of about `target_bytes` each, with row groups of at most BATCH_ROWS rows or BATCH_BYTES
of Arrow data; every new trials file gets its index file (reb_ray.results.index). Files at
least half the target stay as they are, so compacting after every resume does not rewrite a
big sweep each time. A legacy run (one file per attempt under `sweep_id=<id>/`) ends in the
current layout.

Crash safety, wherever the process dies:
1. the new files are written and fsynced under temporary names in `.reb-ray/tmp`;
2. the journal (the inputs to delete, the temporary files to rename and their final names) is
   written, fsynced and renamed into `.reb-ray/journal`: the commit point;
3. the new files are renamed into place, the inputs deleted, then the journal.
Dying before 2 leaves the old files as they were (the next compaction removes the temps);
dying after 2 leaves a journal that every reb-ray reader applies (layout.part_files: inputs
left out, outputs counted) and that the next sink or compaction on the directory finishes
(`recover`). Only an outside reader (pandas, polars, duckdb) that lists a directory inside
step 3 of a compaction that then dies sees files twice, until that recovery. Compaction holds
the run lock exclusively (reb_ray.results.lock), so it never runs while a sink writes there.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from reb_ray.errors import RebRayError
from reb_ray.results.atomic import temp_path
from reb_ray.results.index import INDEX_COLUMNS, index_path, index_table, read_fresh_index
from reb_ray.results.journal import Step, commit, no_step, recover
from reb_ray.results.layout import (
    INDEX_DIR,
    LEGACY_PREFIX,
    STAGES_DIR,
    TRIALS_DIR,
    is_part,
    new_writer_id,
    part_files,
    part_name,
    sweep_dir,
    sweep_dirs,
    sweep_of,
)
from reb_ray.results.lock import RunBusy, RunLock
from reb_ray.results.scan import batches
from reb_ray.results.schema import STAGES_SCHEMA, TRIALS_SCHEMA

TARGET_FILE_BYTES = 256 * 1024 * 1024
BATCH_ROWS = 65_536
BATCH_BYTES = 64 * 1024 * 1024
#: Rows per Parquet row group of a compacted file: a reader of one trial (`trial show`,
#: reb_ray.results.read.read_trial) decodes the row groups that hold it whole, so at 8,192 rows
#: that is about 15 MB of a wide trials table, not the 100 MB of a 54,000-row group.
ROW_GROUP_ROWS = 8_192
DATASETS = ((TRIALS_DIR, TRIALS_SCHEMA), (STAGES_DIR, STAGES_SCHEMA))

__all__ = ["compact", "compact_if_idle", "recover", "CompactionResult", "SweepCompaction"]


@dataclass
class SweepCompaction:
    """One sweep's compaction: files (trials + stages + index) before and after, rows rewritten
    per dataset (empty when nothing needed rewriting)."""

    sweep_id: str
    files_before: int
    files_after: int
    rows: dict[str, int] = field(default_factory=dict)


@dataclass
class CompactionResult:
    """Every compacted sweep of one `compact` call."""

    sweeps: list[SweepCompaction]

    @property
    def files_before(self) -> int:
        return sum(s.files_before for s in self.sweeps)

    @property
    def files_after(self) -> int:
        return sum(s.files_after for s in self.sweeps)

    def describe(self) -> str:
        """One line per sweep: `sweep S: 1204 -> 3 files (trials 1000 rows, stages 7000 rows)`."""
        lines = []
        for s in self.sweeps:
            rewritten = ", ".join(f"{name} {n} rows" for name, n in s.rows.items()) or "nothing to rewrite"
            lines.append(f"sweep {s.sweep_id}: {s.files_before} -> {s.files_after} files ({rewritten})")
        return "\n".join(lines) or "no sweeps"


def compact(output_dir: Path, sweep_id: str | None = None, target_bytes: int = TARGET_FILE_BYTES,
            blocking: bool = False, step: Step | None = None) -> CompactionResult:
    """Compact every sweep under `output_dir` (or only `sweep_id`); see the module docstring.

    `target_bytes`: the size (bytes on disk) new files are cut at. `blocking`: wait for sinks
    writing there to close instead of raising RunBusy. `step`: called with a name after each
    durable step (tests kill the process there to check crash safety). Raises RebRayError when
    `output_dir` holds no results or `sweep_id` is not there, RunBusy (a RebRayError) when a
    sink writes there and `blocking` is False, and OSError on I/O failure (then nothing changed
    unless the commit point was passed, in which case the next run finishes it).
    """
    output_dir = Path(output_dir)
    if not (output_dir / TRIALS_DIR).is_dir() and not (output_dir / STAGES_DIR).is_dir():
        raise RebRayError(f"{output_dir}: no trials/ or stages/ dataset here (is it a sweep's --output directory?)")
    with RunLock(output_dir, exclusive=True, blocking=blocking):
        recover(output_dir, remove_temps=True)
        found = sweeps(output_dir)
        if sweep_id is not None and sweep_id not in found:
            raise RebRayError(f"{output_dir}: no sweep {sweep_id!r} here; sweeps: {', '.join(found) or 'none'}")
        chosen = [sweep_id] if sweep_id is not None else found
        return CompactionResult([_compact_sweep(output_dir, s, target_bytes, step or no_step) for s in chosen])


def compact_if_idle(output_dir: Path, sweep_id: str) -> CompactionResult | None:
    """`compact` of one sweep at the end of writing it (a sweep, a regrade); None when the
    sweep has no files there or another sink still writes into `output_dir` (its own end, or
    `reb-ray compact`, compacts later). Raises like `compact`."""
    if sweep_id not in sweeps(output_dir):
        return None
    try:
        return compact(output_dir, sweep_id)
    except RunBusy:
        return None


def sweeps(output_dir: Path) -> list[str]:
    """Sorted ids of the sweeps with a directory in `trials` or `stages` (either layout)."""
    found = {sweep_of(d) for name, _ in DATASETS for d in sweep_dirs(Path(output_dir) / name)}
    return sorted(s for s in found if s is not None)


def count_files(output_dir: Path, sweep_id: str) -> int:
    """Files holding sweep `sweep_id`: its trials, stages and index part files."""
    output_dir = Path(output_dir)
    index_dir = sweep_dir(output_dir / INDEX_DIR, sweep_id)
    indexes = [p for p in index_dir.iterdir() if is_part(p)] if index_dir.is_dir() else []
    return sum(len(part_files(output_dir / name, sweep_id)) for name, _ in DATASETS) + len(indexes)


def _legacy(path: Path) -> bool:
    return path.parent.name.startswith(LEGACY_PREFIX)


def _inputs(output_dir: Path, dataset: str, sweep_id: str, target_bytes: int) -> list[Path]:
    """The files of one dataset to rewrite, in file order; [] when rewriting gains nothing."""
    parts = part_files(output_dir / dataset, sweep_id)

    def unindexed(p: Path) -> bool:
        return dataset == TRIALS_DIR and read_fresh_index(index_path(output_dir, p), p.stat()) is None

    chosen = [p for p in parts if _legacy(p) or p.stat().st_size < target_bytes // 2 or unindexed(p)]
    if len(chosen) < 2 and not any(_legacy(p) or unindexed(p) for p in chosen):
        return []
    return chosen


def _compact_sweep(output_dir: Path, sweep_id: str, target_bytes: int, step: Step) -> SweepCompaction:
    before = count_files(output_dir, sweep_id)
    writer_id, seq = new_writer_id(), itertools.count(1)
    inputs: list[Path] = []
    outputs: list[tuple[Path, Path]] = []
    rows: dict[str, int] = {}
    try:
        for dataset, schema in DATASETS:
            chosen = _inputs(output_dir, dataset, sweep_id, target_bytes)
            if not chosen:
                continue
            written, rows[dataset] = _rewrite(output_dir, dataset, schema, sweep_id, chosen, target_bytes, writer_id, seq)
            outputs += written
            inputs += chosen
            if dataset == TRIALS_DIR:
                inputs += [i for i in (index_path(output_dir, p) for p in chosen) if i is not None and i.exists()]
        inputs += _orphan_indexes(output_dir, sweep_id, set(inputs))
    except BaseException:
        for tmp, _ in outputs:
            tmp.unlink(missing_ok=True)
        raise
    if inputs:
        step("written")
        commit(output_dir, inputs, outputs, step)
    return SweepCompaction(sweep_id, before, count_files(output_dir, sweep_id), rows)


def _orphan_indexes(output_dir: Path, sweep_id: str, leaving: set[Path]) -> list[Path]:
    """Index files whose trials part no longer exists (their trials file was lost or removed)."""
    index_dir = sweep_dir(output_dir / INDEX_DIR, sweep_id)
    if not index_dir.is_dir():
        return []
    trials_dir = sweep_dir(output_dir / TRIALS_DIR, sweep_id)
    return sorted(p for p in index_dir.iterdir()
                  if is_part(p) and p not in leaving and not (trials_dir / p.name).exists())


class _Output:
    """One new file being written under a temporary name (trials: with its index rows)."""

    def __init__(self, output_dir: Path, final: Path, schema: pa.Schema) -> None:
        self.final = final
        self.tmp = temp_path(output_dir, final)
        self.file = open(self.tmp, "wb")
        self.writer = pq.ParquetWriter(self.file, schema)
        self.keys: list[pa.Table] = []
        self.rows = 0

    def write(self, table: pa.Table, keep_keys: bool) -> None:
        self.writer.write_table(table, row_group_size=ROW_GROUP_ROWS)
        self.rows += table.num_rows
        if keep_keys:
            self.keys.append(table.select(INDEX_COLUMNS))

    def size(self) -> int:
        return self.file.tell()

    def close(self) -> None:
        self.writer.close()
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()


def _rewrite(output_dir: Path, dataset: str, schema: pa.Schema, sweep_id: str, inputs: list[Path],
             target_bytes: int, writer_id: str, seq: itertools.count) -> tuple[list[tuple[Path, Path]], int]:
    """Write the rows of `inputs` (in order) into new temporary files; returns their (temp,
    final) pairs, each trials file followed by its index file, and the rows written. Raises
    RebRayError when the rows written differ from the rows read (nothing is committed)."""
    outputs: list[tuple[Path, Path]] = []
    current: _Output | None = None
    buffer: list[pa.Table] = []
    read = written = 0
    trials = dataset == TRIALS_DIR

    def close_current() -> None:
        nonlocal current
        if current is None:
            return
        current.close()
        outputs.append((current.tmp, current.final))
        if trials:
            keys = pa.concat_tables(current.keys)
            final_index = index_path(output_dir, current.final)
            assert final_index is not None  # outputs always go to a sweep directory of trials/
            tmp_index = temp_path(output_dir, final_index)
            pq.write_table(index_table(keys, current.tmp.stat()), tmp_index)
            _fsync_file(tmp_index)
            outputs.append((tmp_index, final_index))
        current = None

    def drain() -> None:
        nonlocal current, written
        if not buffer:
            return
        if current is None:
            current = _Output(output_dir, sweep_dir(output_dir / dataset, sweep_id) / part_name(writer_id, next(seq)), schema)
        table = pa.concat_tables(buffer)
        buffer.clear()
        current.write(table, trials)
        written += table.num_rows
        if current.size() >= target_bytes:
            close_current()

    try:
        buffered = 0
        for path in inputs:
            for table in batches(path, schema, BATCH_ROWS):
                read += table.num_rows
                buffer.append(table)
                buffered += table.get_total_buffer_size()
                if sum(t.num_rows for t in buffer) >= BATCH_ROWS or buffered >= BATCH_BYTES:
                    drain()
                    buffered = 0
        drain()
        close_current()
    except BaseException:
        if current is not None:
            current.file.close()
            current.tmp.unlink(missing_ok=True)
        for tmp, _ in outputs:
            tmp.unlink(missing_ok=True)
        raise
    if read != written:
        for tmp, _ in outputs:
            tmp.unlink(missing_ok=True)
        raise RebRayError(f"compaction of {dataset} of sweep {sweep_id}: read {read} rows but wrote {written}; nothing changed")
    return outputs, written


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())
