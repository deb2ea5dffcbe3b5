"""Where the results datasets live under an output directory, and which of their files count.

Layout (no hive partitioning, so no partition column can clash with a stored one)::

    <output>/trials/sweep-<URI-encoded sweep_id>/part-<writer>-<seq>.parquet
    <output>/stages/sweep-<id>/part-<writer>-<seq>.parquet
    <output>/index/sweep-<id>/part-<writer>-<seq>.parquet   resume index, one per trials part, same name
    <output>/.reb-ray/tmp/        files being written (fsynced there, then renamed into place)
    <output>/.reb-ray/journal/    committed compactions not yet finished (reb_ray.results.compact)
    <output>/.reb-ray/lock        writers hold it shared, compaction exclusively (reb_ray.results.lock)

Every file holds `sweep_id` as an ordinary column, so pyarrow.dataset, pandas.read_parquet,
polars and duckdb read `<output>/trials` (or `trials/**/*.parquet`) directly and agree. The
dataset directories only ever hold complete Parquet files: temporary files live in
`.reb-ray/tmp`, and a rename within one filesystem is atomic.

Runs written by older versions use `<dataset>/sweep_id=<id>/part-<trial>-a<attempt>.parquet`
(one file per attempt, "legacy"); reb-ray's readers still read them and `reb-ray compact`
converts them to this layout.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import uuid
from pathlib import Path
from urllib.parse import quote, unquote

TRIALS_DIR = "trials"
STAGES_DIR = "stages"
INDEX_DIR = "index"
CONTROL_DIR = ".reb-ray"
TMP_DIR = f"{CONTROL_DIR}/tmp"
JOURNAL_DIR = f"{CONTROL_DIR}/journal"
SWEEP_PREFIX = "sweep-"
LEGACY_PREFIX = "sweep_id="
PART_PREFIX = "part-"
PART_SUFFIX = ".parquet"


def new_writer_id() -> str:
    """A writer's id: its UTC start time (so part names sort in write order) and 8 random hex
    digits (so concurrent writers never share a name)."""
    now = dt.datetime.now(dt.timezone.utc)
    return f"{now:%Y%m%dT%H%M%S%f}-{uuid.uuid4().hex[:8]}"


def part_name(writer_id: str, seq: int) -> str:
    """The file name of a writer's `seq`-th part: `part-<writer_id>-<seq, 5 digits>.parquet`."""
    return f"{PART_PREFIX}{writer_id}-{seq:05d}{PART_SUFFIX}"


def sweep_dir_name(sweep_id: str) -> str:
    """The legacy (one file per attempt) partition directory name `sweep_id=<URI-encoded id>`.

    Still the artifacts' directory name (reb_ray.trial.artifacts), which is not a Parquet dataset."""
    return f"{LEGACY_PREFIX}{quote(sweep_id, safe='')}"


def sweep_dir(root: Path, sweep_id: str) -> Path:
    """The directory of one sweep's files in the dataset at `root`: `sweep-<URI-encoded id>`.

    Encoding leaves only `[A-Za-z0-9_.~%-]`, so no id gives a hidden name, a path separator, a
    glob character or a `key=value` segment that a reader would take for a hive partition."""
    return Path(root) / f"{SWEEP_PREFIX}{quote(sweep_id, safe='')}"


def sweep_of(directory: Path) -> str | None:
    """The sweep id a dataset subdirectory (either layout) holds, or None for anything else."""
    name = Path(directory).name
    for prefix in (SWEEP_PREFIX, LEGACY_PREFIX):
        if name.startswith(prefix):
            return unquote(name[len(prefix):])
    return None


def is_part(path: Path) -> bool:
    """A visible `part-*.parquet` file name (temporary and hidden files never are)."""
    name = Path(path).name
    return name.startswith(PART_PREFIX) and name.endswith(PART_SUFFIX)


def sweep_dirs(root: Path, sweep_id: str | None = None) -> list[Path]:
    """Existing sweep directories under dataset `root`, of one sweep or all, by sweep id; a
    sweep's legacy directory (older rows) before its current one. A missing `root` gives []."""
    root = Path(root)
    if sweep_id is not None:
        candidates = [root / sweep_dir_name(sweep_id), sweep_dir(root, sweep_id)]
        return [d for d in candidates if d.is_dir()]
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.is_dir() and sweep_of(p) is not None]
    return sorted(found, key=lambda p: (sweep_of(p), not p.name.startswith(LEGACY_PREFIX)))


def journals(output_dir: Path) -> list[dict]:
    """The committed, unfinished compaction journals under `output_dir`: each
    {"inputs": [relative paths], "outputs": [[relative temp path, relative final path], ...]}.

    A journal that cannot be parsed was never committed (it is renamed into place whole), so
    it cannot exist; one that does is skipped rather than trusted."""
    directory = Path(output_dir) / JOURNAL_DIR
    if not directory.is_dir():
        return []
    found = []
    for path in sorted(directory.glob("*.json")):
        try:
            found.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    return found


def part_files(root: Path, sweep_id: str | None = None) -> list[Path]:
    """The files that hold the dataset at `root` (e.g. `<output>/trials`), of one sweep or all.

    Visible `part-*.parquet` files of both layouts, ordered by sweep directory then name (names
    start with their writer's UTC start time, so this is write order for one writer and close
    to it across writers). A compaction that has committed its journal but not finished its
    swap is applied: its inputs are left out and its outputs counted (from their temporary
    name if not yet renamed), so no row is seen twice or missed at any point of a compaction.
    A missing `root` gives [].
    """
    root = Path(root)
    files: list[Path] = []
    for directory in sweep_dirs(root, sweep_id):
        files.extend(sorted(p for p in directory.iterdir() if is_part(p) and p.is_file()))
    output_dir = root.parent
    pending = journals(output_dir)
    if not pending:
        return files
    removed = {output_dir / rel for journal in pending for rel in journal.get("inputs", [])}
    kept = [p for p in files if p not in removed]
    present = set(kept)
    for journal in pending:
        for tmp_rel, final_rel in journal.get("outputs", []):
            final = output_dir / final_rel
            if final in present or final.parent.parent != root:
                continue
            if sweep_id is not None and sweep_of(final.parent) != sweep_id:
                continue
            source = final if final.exists() else output_dir / tmp_rel
            if source.exists():
                kept.append(source)
                present.add(final)
    return kept


def fsync_dir(directory: Path) -> None:
    """Make renames and unlinks in `directory` durable; best effort where a directory cannot be
    opened (some filesystems)."""
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
