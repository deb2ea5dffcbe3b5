"""Read the `trials` and `stages` Parquet datasets written by ParquetSink.

Readers take the part files themselves (reb_ray.results.layout: both layouts, a pending
compaction applied) with the explicit schema (reb_ray.results.scan), so they need no partition
discovery, never return null-typed columns, and fill columns an older file lacks with nulls.
Live sinks of this process writing to the same directory are flushed first, so a reader sees
every row written before it was called. Resume reads the index (reb_ray.results.index), never
whole rows.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from reb_ray.results.index import read_index
from reb_ray.results.layout import STAGES_DIR, TRIALS_DIR, part_files
from reb_ray.results.parquet_sink import flush_pending
from reb_ray.results.scan import rows_of, scan
from reb_ray.results.schema import STAGES_SCHEMA, TRIALS_SCHEMA

_LISTINGS = 3  # a compaction swapping files while we read: list again, at most this often


def _read(root: Path, schema: pa.Schema, sweep_id: str | None, columns: list[str] | None = None) -> pa.Table:
    flush_pending(root.parent)
    for listing in range(_LISTINGS):
        try:
            return scan(part_files(root, sweep_id), schema, columns, sweep_id)
        except FileNotFoundError:
            if listing == _LISTINGS - 1:
                raise
    raise AssertionError("unreachable")


def read_trials(output_dir: Path, sweep_id: str | None = None, columns: list[str] | None = None) -> pa.Table:
    """All `trials` rows under `output_dir` (every attempt), or one sweep's, as TRIALS_SCHEMA.

    Shape: one row per written trial attempt, columns exactly TRIALS_SCHEMA (typed, nullable),
    or only `columns` (in that order: a driver reading history or spend over a million rows
    reads a few columns, not every row); after a retry or `--rerun` a trial has several rows,
    and `latest_attempts` picks the one that counts.
    A missing directory gives an empty table of the schema. Raises RebRayError (one line naming
    the file) for an unreadable shard or one whose schema is foreign.
    """
    return _read(Path(output_dir) / TRIALS_DIR, TRIALS_SCHEMA, sweep_id, columns)


def read_trial(output_dir: Path, trial_id: str, sweep_id: str | None = None, stages: bool = False) -> pa.Table:
    """The `trials` rows (`stages`: the `stages` rows) of one trial id, every attempt, of every
    sweep or of `sweep_id`'s: what `read_trials(...).filter(trial_id == ...)` gives, read from
    the row groups that hold it only (`reb-ray trial show` on a 100,000-trial output in well
    under a second). Raises like `read_trials`."""
    root = Path(output_dir) / (STAGES_DIR if stages else TRIALS_DIR)
    flush_pending(root.parent)
    for listing in range(_LISTINGS):
        try:
            return rows_of(part_files(root, sweep_id), STAGES_SCHEMA if stages else TRIALS_SCHEMA, "trial_id", trial_id,
                           sweep_id=sweep_id)
        except FileNotFoundError:
            if listing == _LISTINGS - 1:
                raise
    raise AssertionError("unreachable")


def read_stages(output_dir: Path, sweep_id: str | None = None, columns: list[str] | None = None) -> pa.Table:
    """All `stages` rows under `output_dir`, or one sweep's, as STAGES_SCHEMA.

    Shape: one row per stage per written attempt, columns exactly STAGES_SCHEMA, or only
    `columns` (in that order; the analysis reads a few, not every log head and tail). A missing
    directory gives an empty table of the schema. Raises RebRayError (one line naming the
    file) for an unreadable shard or one whose schema is foreign.
    """
    return _read(Path(output_dir) / STAGES_DIR, STAGES_SCHEMA, sweep_id, columns)


#: The suffixes of sweep ids that hold new gradings of another sweep's attempts (`reb-ray
#: regrade`: stored outputs graded again; `--rerun-probes`: the kept environments probed again).
REGRADE_SUFFIX, REPROBE_SUFFIX = "-regrade", "-reprobe"
GRADING_SUFFIXES = (REGRADE_SUFFIX, REPROBE_SUFFIX)


def graded_copies(sweep_id: str) -> set[str]:
    """The sweep ids of the gradings of `sweep_id`'s attempts."""
    return {sweep_id + suffix for suffix in GRADING_SUFFIXES}


def source_sweep(rows: list[dict]) -> str | None:
    """The sweep that ran the attempt a trial's rows of several sweeps (dicts with `sweep_id`
    and `reused_from`) stand for: the one every other sweep only graded again (`graded_copies`)
    or only reused (each of its rows' `reused_from` names it, as a later sweep with the same
    trial does); None when two of the sweeps ran it each on their own (the caller asks for a
    sweep). One sweep is its own source."""
    sweeps = sorted({r["sweep_id"] for r in rows})
    reused: dict[str, set] = {}
    for r in rows:
        reused.setdefault(r["sweep_id"], set()).add(r.get("reused_from"))
    for source in sweeps:
        family, grown = {source}, True
        while grown:  # a grading of a reuser, a reuser of a grading: still the source's attempt
            more = {s for s in sweeps if s not in family and (
                any(s in graded_copies(f) for f in family) or (len(reused[s]) == 1 and reused[s] <= family))}
            family |= more
            grown = bool(more)
        if family == set(sweeps):
            return source
    return None


def latest_attempts(table: pa.Table) -> pa.Table:
    """The current attempt of every trial in `table` (TRIALS_SCHEMA rows, or any table with
    their sweep_id, trial_id, attempt and status, such as the resume index): one row per
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
    Column-wise (`latest_indices`): 100,000 rows in milliseconds.
    """
    return table.take(pa.array(latest_indices(table), pa.int64()))


def _codes(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Integer codes of a column's values (equal values, equal codes; null: -1)."""
    encoded = pc.dictionary_encode(column)
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks() if encoded.num_chunks else pa.array([], pa.dictionary(pa.int32(), pa.string()))
    return pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)


def latest_indices(table: pa.Table) -> np.ndarray:
    """The row positions `latest_attempts` keeps, ascending (its rule, computed column-wise:
    one stable sort by trial, then scored, attempt and position; the last row of each trial)."""
    for name in ("sweep_id", "trial_id", "attempt", "status"):
        if name not in table.column_names:
            raise KeyError(f"trials table lacks column {name!r}")
    n = table.num_rows
    if n == 0:
        return np.zeros(0, np.int64)
    position = np.arange(n, dtype=np.int64)
    sweep = _codes(table["sweep_id"])
    trial = _codes(table["trial_id"])
    trial = np.where(trial < 0, trial.max() + 1 + position, trial)  # a null trial_id: its own trial
    scored = pc.fill_null(pc.equal(table["status"], "scored"), False).to_numpy(zero_copy_only=False)
    attempt = pc.fill_null(table["attempt"], -1).to_numpy(zero_copy_only=False).astype(np.int64)
    order = np.lexsort((position, attempt, scored, trial, sweep))
    last = np.ones(n, bool)
    last[:-1] = (sweep[order][1:] != sweep[order][:-1]) | (trial[order][1:] != trial[order][:-1])
    return np.sort(order[last])


def resume_index(output_dir: Path, sweep_id: str) -> pa.Table:
    """Every recorded attempt of `sweep_id` as index rows (sweep_id, trial_id, attempt, status,
    failure_owner; reb_ray.results.index), from the resume index, never whole rows."""
    flush_pending(Path(output_dir))
    return read_index(Path(output_dir), sweep_id)


def scored_trial_ids(output_dir: Path, sweep_id: str) -> set[str]:
    """trial_ids of sweep `sweep_id` whose current attempt (`latest_attempts`) is "scored",
    i.e. with at least one scored attempt.

    Used by resume: those trials are done; trials with only infra_error / interrupted attempts
    are not. Reads the resume index. Raises RebRayError like read_trials.
    """
    return scored_in(resume_index(output_dir, sweep_id))


def scored_in(index: pa.Table) -> set[str]:
    """trial_ids whose current attempt (`latest_attempts`) in `index` (resume index or trials
    rows of one sweep) is "scored"."""
    latest = latest_attempts(index)
    scored = latest.filter(pc.equal(latest["status"], "scored"))
    return {t for t in scored["trial_id"].to_pylist() if t is not None}


def last_attempts(output_dir: Path, sweep_id: str) -> dict[str, int]:
    """The highest attempt number recorded per trial_id of `sweep_id`, whatever its status
    (resume numbers new attempts after it, so an earlier attempt's row is never duplicated;
    which attempt *counts* is `latest_attempts`' rule). Reads the resume index."""
    return last_attempt_numbers(resume_index(output_dir, sweep_id))


def last_attempt_numbers(index: pa.Table) -> dict[str, int]:
    """The highest attempt number per trial_id in `index` (rows of one sweep)."""
    known = pc.and_(pc.is_valid(index["trial_id"]), pc.is_valid(index["attempt"]))
    grouped = index.filter(known).group_by("trial_id").aggregate([("attempt", "max")])
    return dict(zip(grouped["trial_id"].to_pylist(), grouped["attempt_max"].to_pylist()))


def reward_columns(table: pa.Table) -> pa.Table:
    """`table` (trials rows with a `rewards` column: a Harbor task's JSON object of metrics)
    with one float64 column `reward_<key>` per key any row holds, appended in key order: null
    where a row lacks the key or has no rewards (unknown, never 0). A key that would repeat an
    existing column name is left out. Rewards that are not a JSON object of numbers read as null."""
    import json

    if "rewards" not in table.column_names:
        return table
    parsed: list[dict] = []
    for text in table.column("rewards").to_pylist():
        try:
            value = json.loads(text) if text else {}
        except ValueError:
            value = {}
        parsed.append(value if isinstance(value, dict) else {})
    keys = sorted({key for row in parsed for key in row})
    for key in keys:
        name = f"reward_{key}"
        if name in table.column_names:
            continue
        values = [row.get(key) if isinstance(row.get(key), (int, float)) and not isinstance(row.get(key), bool)
                  else None for row in parsed]
        table = table.append_column(name, pa.array([None if v is None else float(v) for v in values], pa.float64()))
    return table
