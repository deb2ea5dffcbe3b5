"""Write `trials` and `stages` rows into rolled Parquet part files, each replaced atomically.

Layout: reb_ray.results.layout (`<output>/trials/sweep-<id>/part-<writer>-<seq>.parquet`, the
same for `stages`, and the resume index beside them, reb_ray.results.index).

The rolling rule. Each sink is one writer with, per dataset and sweep, one *open part*: the
rows written to it so far, kept in memory. A flush rewrites each open part with new rows as a
whole file (temp in `.reb-ray/tmp`, fsync, rename over the previous version) and, for a trials
part, its index file. An open part is closed (never rewritten again; the next rows start a new
part) once it holds `part_rows` rows or `part_bytes` bytes of Arrow data, or is `part_age_s`
seconds old. So a sweep of N trials leaves about N * row bytes / part_bytes files, not one per
attempt, and `reb-ray compact` (run at every sweep's end) merges them into a few.

The crash bound. `write` flushes before it returns when the sink was idle (no flush running
or due, the last one at least `flush_interval_s` old), so a lone trial end is on disk at once.
Otherwise (a burst) a background thread flushes at most `flush_interval_s` after the last
flush, while writes go on converting: a crash (SIGKILL included) loses at most the rows of
that interval (plus the flush under way), and never leaves a torn or half-renamed file. A
part that fills up is closed at once and waits for that flush, so a burst writes each row
about once; more than EARLY_SEALED_PARTS full parts start the flush at once, and more than
MAX_SEALED_PARTS make a write flush itself (the buffer's bound). Within a flush trials parts
(and their index) are written before stages parts, so a stage row on disk always has its trial
row there. A reader in this process sees the rows at once (reb_ray.results.read flushes live
sinks of its directory first). `close()` (or leaving a `with` block, or the process exiting
normally) flushes the rest.
"""

from __future__ import annotations

import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from reb_ray.results.atomic import write_atomic
from reb_ray.results.index import index_path, index_table
from reb_ray.results.layout import STAGES_DIR, TRIALS_DIR, new_writer_id, part_name, sweep_dir, sweep_dir_name
from reb_ray.results.lock import RunLock
from reb_ray.results.rows import rows_to_table, split_by_sweep
from reb_ray.results.schema import STAGES_SCHEMA, TRIALS_SCHEMA

__all__ = ["ParquetSink", "rows_to_table", "sweep_dir_name", "flush_pending"]

DEFAULT_FLUSH_INTERVAL_S = 1.0
DEFAULT_PART_ROWS = 250_000
DEFAULT_PART_BYTES = 32 * 1024 * 1024
DEFAULT_PART_AGE_S = 600.0
# Full parts wait for the next timed flush, so that a burst writes each row about once (a
# flush also rewrites the open parts); past EARLY_SEALED_PARTS the flusher starts at once, and
# past MAX_SEALED_PARTS a write flushes itself (the backpressure that bounds the buffer, at
# most MAX_SEALED_PARTS x part_bytes, when rows come faster than the disk takes them).
EARLY_SEALED_PARTS = 4
MAX_SEALED_PARTS = 8
# Rows per chunk below which a part's chunks are merged before it is written (_combined).
MIN_CHUNK_ROWS = 512


@dataclass
class _Part:
    """One open part file: its rows so far (as Arrow chunks) and whether the file lags them."""

    dataset: str
    path: Path
    opened: float
    tables: list[pa.Table] = field(default_factory=list)
    rows: int = 0
    nbytes: int = 0
    dirty: bool = False


_LIVE: weakref.WeakSet[_Writer] = weakref.WeakSet()


def flush_pending(output_dir: Path) -> None:
    """Flush every live sink of this process writing under `output_dir` (read-your-writes for
    reb-ray's readers). A failing flush is left for that sink's next write or close to raise."""
    target = Path(output_dir).resolve()
    for writer in list(_LIVE):
        if writer.resolved == target:
            try:
                writer.flush()
            except Exception:
                pass


class _Writer:
    """The sink's state, apart from the ParquetSink object so that its flusher thread and
    finalizer can hold it without keeping the sink alive.

    Two locks: `_cond` guards the buffers (held only briefly, so writes go on while a flush
    writes files), `_flushing` makes flushes one at a time."""

    def __init__(self, output_dir: Path, flush_interval_s: float, part_rows: int, part_bytes: int,
                 part_age_s: float) -> None:
        self.output_dir = output_dir
        self.resolved = output_dir.resolve()
        self.flush_interval_s = flush_interval_s
        self.part_rows, self.part_bytes, self.part_age_s = part_rows, part_bytes, part_age_s
        self.writer_id = new_writer_id()
        self._cond = threading.Condition()
        self._flushing = threading.Lock()
        self._parts: dict[tuple[str, str], _Part] = {}
        self._sealed: list[_Part] = []  # full parts whose last version is not yet written
        self._seq = 0
        self._last_flush = float("-inf")
        self._due: float | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._lock: RunLock | None = None
        self._closed = False
        _LIVE.add(self)

    def add(self, planned: list[tuple[str, str, pa.Table]]) -> list[Path]:
        """Append converted tables (dataset, sweep_id, table) to their open parts; flush now or
        schedule it (module docstring). Raises OSError when a flush now fails (the rows stay
        buffered and the next flush retries them) and ValueError after close."""
        with self._cond:
            if self._closed:
                raise ValueError(f"results sink for {self.output_dir} is closed")
            if self._lock is None:
                self._open()
            paths: list[Path] = []
            for dataset, sweep_id, table in planned:
                part = self._part(dataset, sweep_id)
                part.tables.append(table)
                part.rows += table.num_rows
                part.nbytes += table.get_total_buffer_size()  # O(columns); .nbytes walks every buffer
                part.dirty = True
                if part.path not in paths:
                    paths.append(part.path)
                if part.rows >= self.part_rows or part.nbytes >= self.part_bytes:
                    del self._parts[(dataset, sweep_id)]  # full: the next rows start a new part
                    self._sealed.append(part)
            now = time.monotonic()
            idle = not self._flushing.locked() and self._due is None and now - self._last_flush >= self.flush_interval_s
            sync = (self.flush_interval_s == 0 or self._error is not None or idle
                    or len(self._sealed) > MAX_SEALED_PARTS)
            if not sync:  # full parts wait for the timed flush, unless they pile up
                self._schedule(now if len(self._sealed) > EARLY_SEALED_PARTS else None)
        if sync:
            self.flush()
        return paths

    def _open(self) -> None:
        """First write: hold the run lock shared (waits while a compaction runs) and finish any
        compaction that a crash interrupted after its commit point."""
        from reb_ray.results.journal import recover

        self.output_dir.mkdir(parents=True, exist_ok=True)
        self._lock = RunLock(self.output_dir, exclusive=False, blocking=True)
        recover(self.output_dir)

    def _part(self, dataset: str, sweep_id: str) -> _Part:
        part = self._parts.get((dataset, sweep_id))
        if part is None:
            self._seq += 1
            name = part_name(self.writer_id, self._seq)
            part = _Part(dataset, sweep_dir(self.output_dir / dataset, sweep_id) / name, time.monotonic())
            self._parts[(dataset, sweep_id)] = part
        return part

    def _schedule(self, at: float | None = None) -> None:
        """Called with `_cond` held: make sure a flush happens by `at` (monotonic seconds;
        default: last flush + interval)."""
        at = self._last_flush + self.flush_interval_s if at is None else at
        self._due = at if self._due is None else min(self._due, at)
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"reb-ray sink {self.writer_id}", daemon=True)
            self._thread.start()
        self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closed and self._due is not None and self._due > time.monotonic():
                    self._cond.wait(self._due - time.monotonic())
                if self._closed or self._due is None:
                    self._thread = None
                    return
            try:
                self.flush()
            except Exception:  # kept in self._error: the next write or close raises it
                with self._cond:
                    self._due = None

    def flush(self) -> None:
        """Write every full part not yet written and every dirty open part (trials and their
        index first, then stages), then close the open parts that are old. Raises OSError
        (also kept for the next write) when a write fails; the rows stay buffered.

        The buffer lock is held only to take the snapshot and to put the combined chunks back:
        concatenating and encoding run while the caller's thread converts its next batch
        (pyarrow releases the GIL for both)."""
        with self._flushing:
            started = time.monotonic()
            with self._cond:
                order = {TRIALS_DIR: 0, STAGES_DIR: 1}
                dirty = [*self._sealed, *(p for p in self._parts.values() if p.dirty)]
                dirty.sort(key=lambda p: order[p.dataset])  # stable: full parts (older) first
                snapshot = [(part, list(part.tables)) for part in dirty]
                for part in dirty:
                    part.dirty = False  # rows added from here on make it dirty again
                self._due = None
            try:
                combined = [(part, self._combined(tables), len(tables)) for part, tables in snapshot]
                with self._cond:
                    for part, table, count in combined:
                        part.tables[:count] = [table]  # chunks appended meanwhile stay after it
                for part, table, _ in combined:
                    self._write(part, table)
            except BaseException as exc:
                with self._cond:
                    for part, _ in snapshot:
                        part.dirty = True
                    self._error = exc
                raise
            with self._cond:
                self._error = None
                self._last_flush = started
                self._sealed = [p for p in self._sealed if p.dirty]  # rows added meanwhile: written next time
                for key, part in list(self._parts.items()):
                    if not part.dirty and started - part.opened >= self.part_age_s:
                        del self._parts[key]  # closed: the next rows start a new part
                if self._sealed or any(p.dirty for p in self._parts.values()):
                    self._schedule(started if len(self._sealed) > EARLY_SEALED_PARTS else None)

    @staticmethod
    def _combined(tables: list[pa.Table]) -> pa.Table:
        """A part's chunks as one table; called without `_cond` held. Chunks of a batched
        write are kept as they are (no copy: a Parquet write of 1,000-row chunks costs what one
        chunk does), small ones (one trial per write) merged into one, since a write walks each
        chunk of each column (600 one-trial chunks write 7x slower than one)."""
        if len(tables) == 1:
            return tables[0]
        table = pa.concat_tables(tables)
        return table.combine_chunks() if table.num_rows < len(tables) * MIN_CHUNK_ROWS else table

    def _write(self, part: _Part, table: pa.Table) -> None:
        stat = write_atomic(table, part.path, self.output_dir)
        if part.dataset == TRIALS_DIR:
            index = index_path(self.output_dir, part.path)
            assert index is not None  # a sink's parts are always in a sweep directory of trials/
            write_atomic(index_table(table, stat), index, self.output_dir)

    def close(self) -> None:
        """Flush, stop the flusher, release the run lock. Raises OSError when the last flush
        fails (the lock is released all the same); a second call does nothing."""
        with self._cond:
            if self._closed:
                return
        try:
            self.flush()
        finally:
            with self._cond:
                self._closed = True
                self._cond.notify_all()
                self._parts.clear()
                self._sealed.clear()
                if self._lock is not None:
                    self._lock.release()
                    self._lock = None
            _LIVE.discard(self)


class ParquetSink:
    """Appends rows to the `trials` and `stages` Parquet datasets (and the resume index) under
    `output_dir`, in rolled part files (module docstring: the rolling rule and the crash bound).

    `flush_interval_s` (seconds, >= 0; 0 flushes in every write) bounds how long a written row
    may stay only in memory; `part_rows` (rows), `part_bytes` (bytes of Arrow data, which also
    bounds the cost of one rewrite) and `part_age_s` (seconds) close an open part. Each sink is
    one writer with its own file names, so sinks in several processes never share a file.
    Use it as a context manager or call `close()`; an unclosed sink is flushed when it is
    garbage-collected or the interpreter exits normally. Writing the same (trial_id, attempt)
    twice stores two rows (resume numbers a new attempt after the last one recorded, so the
    harness never does; `read.latest_attempts` keeps the one read last).
    Raises ValueError for a non-positive part limit or a negative interval.
    """

    def __init__(self, output_dir: Path, flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S,
                 part_rows: int = DEFAULT_PART_ROWS, part_bytes: int = DEFAULT_PART_BYTES,
                 part_age_s: float = DEFAULT_PART_AGE_S) -> None:
        """Use `output_dir` (created on the first write) as the results root."""
        if flush_interval_s < 0 or part_rows < 1 or part_bytes < 1 or part_age_s <= 0:
            raise ValueError(
                f"ParquetSink: flush_interval_s={flush_interval_s}, part_rows={part_rows}, part_bytes={part_bytes},"
                f" part_age_s={part_age_s}: the interval must be >= 0 and the part limits > 0"
            )
        self.output_dir = Path(output_dir)
        self._writer = _Writer(self.output_dir, flush_interval_s, part_rows, part_bytes, part_age_s)
        self._finalizer = weakref.finalize(self, self._writer.close)

    def write(self, trial_rows: list[dict], stage_rows: list[dict]) -> list[Path]:
        """Add trial rows (TRIALS_SCHEMA) and stage rows (STAGES_SCHEMA); on disk within
        `flush_interval_s` seconds (at once when the sink was idle: module docstring).

        Both lists are validated and converted before anything is buffered. Every row needs a
        non-empty string `sweep_id`, a `trial_id` and an `attempt`; other missing keys are
        null. Returns the part files that hold (or, until the next flush, will hold) the rows;
        none for empty lists. Raises ValueError for an unknown key, a missing key column, an
        unconvertible value or a closed sink, and OSError when a flush it runs fails.
        """
        planned: list[tuple[str, str, pa.Table]] = []
        for rows, schema, dataset in ((trial_rows, TRIALS_SCHEMA, TRIALS_DIR), (stage_rows, STAGES_SCHEMA, STAGES_DIR)):
            if rows:
                table = rows_to_table(rows, schema)
                planned += [(dataset, sweep_id, part) for sweep_id, part in split_by_sweep(table, rows, dataset)]
        if not planned:
            return []
        return self._writer.add(planned)

    def flush(self) -> None:
        """Write every buffered row now. Raises OSError when that fails."""
        self._writer.flush()

    def close(self) -> None:
        """Flush the rest and release the run lock; later writes raise ValueError. Raises
        OSError when the last flush fails."""
        self._finalizer.detach()
        self._writer.close()

    def __enter__(self) -> ParquetSink:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
