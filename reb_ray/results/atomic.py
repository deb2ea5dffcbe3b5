"""Whole-file Parquet writes that readers never see torn: temp file, fsync, rename.

Temporary files live in `<output>/.reb-ray/tmp` (reb_ray.results.layout), outside every
dataset directory, so no reader (ours, pandas, polars, duckdb) can pick one up; the rename into
the dataset directory is atomic because both are on one filesystem.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from reb_ray.results.layout import TMP_DIR, fsync_dir

TEMP_SUFFIX = ".tmp"


def temp_path(output_dir: Path, final: Path) -> Path:
    """A fresh temporary path for `final` in `<output_dir>/.reb-ray/tmp` (created), unique per
    process and call, so concurrent writers never share one."""
    directory = Path(output_dir) / TMP_DIR
    directory.mkdir(parents=True, exist_ok=True)
    return directory / f"{Path(final).name}.{os.getpid()}.{uuid.uuid4().hex}{TEMP_SUFFIX}"


def write_temp(table: pa.Table, tmp: Path, row_group_size: int | None = None) -> None:
    """Write `table` to `tmp` as Parquet and fsync it; a failed write removes `tmp`.
    Raises OSError / pyarrow errors from the write."""
    try:
        # Arrow's own file, not a Python one: a Python file takes the GIL for every page the
        # writer emits, so a flusher thread's write crawled while another thread converted rows.
        with pa.OSFile(str(tmp), "wb") as f:
            pq.write_table(table, f, row_group_size=row_group_size)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)  # flushes the file's pages whatever the descriptor's mode
        finally:
            os.close(fd)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def publish(tmp: Path, final: Path) -> None:
    """Rename the complete file `tmp` to `final` (replacing a file there whole) and make the
    rename durable. Raises OSError."""
    final.parent.mkdir(parents=True, exist_ok=True)
    os.replace(tmp, final)
    fsync_dir(final.parent)


def write_atomic(table: pa.Table, final: Path, output_dir: Path) -> os.stat_result:
    """Write `table` to `final` atomically (temp in `output_dir`'s tmp directory, fsync,
    rename); returns the stat of the file now at `final`. Raises OSError / pyarrow errors; on
    failure `final` is unchanged and no temporary file is left."""
    tmp = temp_path(output_dir, final)
    write_temp(table, tmp)
    try:
        publish(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return final.stat()
