"""Read the `trials` and `stages` Parquet datasets written by ParquetSink.

Readers take the shard files themselves (`<root>/sweep_id=*/part-*.parquet`, hidden and
temporary files ignored) with the explicit schema, so they need no partition discovery, never
return null-typed columns, and fill columns an older shard lacks with nulls.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from reb_ray.errors import RebRayError
from reb_ray.results.parquet_sink import (
    SHARD_PREFIX,
    SHARD_SUFFIX,
    STAGES_DIR,
    TRIALS_DIR,
    sweep_dir_name,
)
from reb_ray.results.schema import STAGES_SCHEMA, TRIALS_SCHEMA


def shard_files(root: Path, sweep_id: str | None = None) -> list[Path]:
    """Sorted shard files of the dataset at `root`, of one sweep or of all sweeps.

    Only visible `part-*.parquet` files in `sweep_id=<id>` directories count: temp files
    (hidden, `*.tmp`) and anything else are ignored. A missing `root` gives [].
    """
    root = Path(root)
    if sweep_id is not None:
        dirs = [root / sweep_dir_name(sweep_id)]
    elif root.is_dir():
        dirs = sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith("sweep_id="))
    else:
        dirs = []
    files: list[Path] = []
    for d in dirs:
        if d.is_dir():
            files.extend(
                p
                for p in d.iterdir()
                if p.name.startswith(SHARD_PREFIX) and p.name.endswith(SHARD_SUFFIX) and p.is_file()
            )
    return sorted(files)


def _check_schema(path: Path, schema: pa.Schema) -> None:
    """Raise RebRayError naming `path` when its footer is unreadable or its schema foreign."""
    try:
        found = pq.read_schema(path)
    except (OSError, pa.ArrowException) as exc:
        raise RebRayError(f"unreadable results shard {path}: {_one_line(exc)}") from exc
    wanted = (schema.metadata or {}).get(b"reb_ray.dataset")
    tagged = (found.metadata or {}).get(b"reb_ray.dataset")
    if tagged is not None and tagged != wanted:
        raise RebRayError(
            f"results shard {path} belongs to dataset {tagged.decode()!r}, not {wanted.decode()!r};"
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


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _read(
    root: Path, schema: pa.Schema, sweep_id: str | None, columns: list[str] | None = None
) -> pa.Table:
    files = shard_files(root, sweep_id)
    if not files:
        table = schema.empty_table()
        return table.select(columns) if columns is not None else table
    for path in files:
        _check_schema(path, schema)
    dataset = ds.dataset([str(p) for p in files], schema=schema, format="parquet")
    flt = ds.field("sweep_id") == sweep_id if sweep_id is not None else None
    try:
        return dataset.to_table(columns=columns, filter=flt)
    except (OSError, pa.ArrowException) as exc:
        for path in files:  # find the shard at fault so the message can name it
            try:
                pq.read_table(path)
            except (OSError, pa.ArrowException) as inner:
                raise RebRayError(f"unreadable results shard {path}: {_one_line(inner)}") from inner
        raise RebRayError(f"cannot read results under {root}: {_one_line(exc)}") from exc


def read_trials(output_dir: Path, sweep_id: str | None = None) -> pa.Table:
    """All `trials` rows under `output_dir` (every attempt), or one sweep's, as TRIALS_SCHEMA.

    Shape: one row per written trial attempt, columns exactly TRIALS_SCHEMA (typed, nullable);
    after a retry or `--rerun` a trial has several rows, and `latest_attempts` picks the one
    that counts.
    A missing directory gives an empty table of the schema. Raises RebRayError (one line naming
    the file) for an unreadable shard or one whose schema is foreign.
    """
    return _read(Path(output_dir) / TRIALS_DIR, TRIALS_SCHEMA, sweep_id)


def read_stages(output_dir: Path, sweep_id: str | None = None, columns: list[str] | None = None) -> pa.Table:
    """All `stages` rows under `output_dir`, or one sweep's, as STAGES_SCHEMA.

    Shape: one row per stage per written attempt, columns exactly STAGES_SCHEMA, or only
    `columns` (in that order; the analysis reads a few, not every log head and tail). A missing
    directory gives an empty table of the schema. Raises RebRayError (one line naming the
    file) for an unreadable shard or one whose schema is foreign.
    """
    return _read(Path(output_dir) / STAGES_DIR, STAGES_SCHEMA, sweep_id, columns)


def latest_attempts(table: pa.Table) -> pa.Table:
    """The current attempt of every trial in `table` (TRIALS_SCHEMA rows): one row per
    (sweep_id, trial_id), in the table's order.

    The rule, the one every reader uses (summaries, `reb-ray report`, regrade, resume): a
    trial's current attempt is its highest-numbered `scored` attempt; a trial with no scored
    attempt is represented by its highest-numbered attempt (infra_error or interrupted). So after
    `--rerun` the rerun's score replaces the earlier one, and a rerun that then fails for
    infrastructure reasons does not erase the earlier score: an infra failure says nothing about
    the agent (it is never scored) and is still counted among the sweep's infra-error attempts.
    A null attempt ranks below every number; a row with a null trial_id is its own trial. Ties
    (the same attempt number written twice) keep the row read last.
    Raises KeyError naming a column among sweep_id, trial_id, attempt, status that is missing.
    """
    columns = {}
    for name in ("sweep_id", "trial_id", "attempt", "status"):
        if name not in table.column_names:
            raise KeyError(f"trials table lacks column {name!r}")
        columns[name] = table[name].to_pylist()
    best: dict[tuple, tuple[tuple[bool, int], int]] = {}
    for i, (sweep, trial, attempt, status) in enumerate(
        zip(columns["sweep_id"], columns["trial_id"], columns["attempt"], columns["status"])
    ):
        key = (sweep, trial) if trial is not None else (sweep, None, i)
        rank = (status == "scored", -1 if attempt is None else attempt)
        if key not in best or rank >= best[key][0]:
            best[key] = (rank, i)
    return table.take(pa.array(sorted(i for _, i in best.values()), pa.int64()))


def scored_trial_ids(output_dir: Path, sweep_id: str) -> set[str]:
    """trial_ids of sweep `sweep_id` whose current attempt (`latest_attempts`) is "scored",
    i.e. with at least one scored attempt.

    Used by resume: those trials are done; trials with only infra_error / interrupted attempts
    are not. Raises RebRayError like read_trials.
    """
    table = _read(Path(output_dir) / TRIALS_DIR, TRIALS_SCHEMA, sweep_id, ["sweep_id", "trial_id", "attempt", "status"])
    latest = latest_attempts(table)
    scored = latest.filter(pc.equal(latest["status"], "scored"))
    return {t for t in scored["trial_id"].to_pylist() if t is not None}


def last_attempts(output_dir: Path, sweep_id: str) -> dict[str, int]:
    """The highest attempt number recorded per trial_id of `sweep_id`, whatever its status
    (resume numbers new attempts after it, so an earlier attempt's shard is never overwritten;
    which attempt *counts* is `latest_attempts`' rule)."""
    table = _read(Path(output_dir) / TRIALS_DIR, TRIALS_SCHEMA, sweep_id, ["trial_id", "attempt"])
    last: dict[str, int] = {}
    for trial_id, attempt in zip(table["trial_id"].to_pylist(), table["attempt"].to_pylist()):
        if trial_id is not None and attempt is not None:
            last[trial_id] = max(attempt, last.get(trial_id, 0))
    return last
