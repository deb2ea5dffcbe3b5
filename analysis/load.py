"""Load a run's `trials` and `stages` datasets for analysis, as a pyarrow Table or a pandas or
polars frame.

Every read goes through `reb_ray.results.read` (the files and their layout are that module's
business), and the attempt that counts is `reb_ray.results.read.latest_attempts`' one rule: a
trial's highest-numbered scored attempt, else its highest attempt. By default only scored
current attempts are returned, the rows every score is computed from; `scored_only=False` adds
the current attempts that never scored (infra_error, interrupted), `all_attempts=True` returns
every written attempt (retries and reruns included).

    >>> trials = load_trials("reb-runs")                 # pyarrow.Table, TRIALS_SCHEMA columns
    >>> df = load_trials("reb-runs", to="pandas")        # or to="polars"
    >>> c5 = load_stages("reb-runs", stage="c5")         # the C5 stage rows of those trials
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from reb_ray.errors import RebRayError
from reb_ray.results.parquet_sink import TRIALS_DIR
from reb_ray.results.read import latest_attempts, read_stages, read_trials
from reb_ray.results.schema import STAGES_SCHEMA

Frame = Literal["arrow", "pandas", "polars"]
FRAMES = ("arrow", "pandas", "polars")


def _convert(table: pa.Table, to: str) -> Any:
    if to == "arrow":
        return table
    if to == "pandas":
        try:
            import pandas  # noqa: F401  (to_pandas needs it; a clear error beats pyarrow's)
        except ImportError as exc:
            raise RebRayError("to='pandas' needs pandas: pip install pandas") from exc
        return table.to_pandas()
    if to == "polars":
        try:
            import polars
        except ImportError as exc:
            raise RebRayError("to='polars' needs polars: pip install polars") from exc
        return polars.from_arrow(table)
    raise RebRayError(f"to={to!r}: expected one of {', '.join(FRAMES)}")


def _check_run(output_dir: Path) -> Path:
    output_dir = Path(output_dir)
    if not (output_dir / TRIALS_DIR).is_dir():
        raise RebRayError(f"{output_dir}: no {TRIALS_DIR}/ dataset here (is it a sweep's --output directory?)")
    return output_dir


def current_attempts(trials: pa.Table, scored_only: bool = True) -> pa.Table:
    """The current attempt of every trial of a trials table (`latest_attempts`), only the
    scored ones unless `scored_only` is False. Same columns, the table's row order.
    Raises KeyError naming a missing identity column (sweep_id, trial_id, attempt, status)."""
    latest = latest_attempts(trials)
    if scored_only:
        latest = latest.filter(pc.fill_null(pc.equal(latest["status"], "scored"), False))
    return latest


def load_trials(output_dir: Path | str, sweep_id: str | None = None, *, scored_only: bool = True,
                all_attempts: bool = False, to: Frame = "arrow") -> Any:
    """The trials rows of the run at `output_dir` (a sweep's --output directory), of one sweep
    or all.

    Shape: TRIALS_SCHEMA columns (typed, nullable: unknown is null), one row per trial: its
    current attempt (`latest_attempts`), only when scored unless `scored_only=False`;
    `all_attempts=True` gives every written attempt instead (and ignores `scored_only`).
    `to`: "arrow" (pyarrow.Table), "pandas" (DataFrame) or "polars" (DataFrame).
    Raises RebRayError (one line) when `output_dir` holds no trials dataset, for an unreadable or
    foreign shard, for an unknown `to`, or when the frame library is not installed.
    """
    if to not in FRAMES:
        raise RebRayError(f"to={to!r}: expected one of {', '.join(FRAMES)}")
    trials = read_trials(_check_run(Path(output_dir)), sweep_id)
    if not all_attempts:
        trials = current_attempts(trials, scored_only)
    return _convert(trials, to)


def attempt_keys(trials: pa.Table) -> pa.ChunkedArray:
    """One string per row naming its attempt ("sweep_id, trial_id, attempt" joined by a unit
    separator), for matching stages rows to trials rows without a Python loop."""
    attempt = pc.cast(trials["attempt"], pa.string())
    return pc.binary_join_element_wise(trials["sweep_id"], trials["trial_id"], attempt, "\x1f")


def stages_of(stages: pa.Table, trials: pa.Table, stage: str | None = None) -> pa.Table:
    """The rows of a stages table that belong to the attempts in `trials` (matched on sweep_id,
    trial_id and attempt), of one stage ("c0".."c5", "agent", "env_size", ...) or all. Same
    columns, the stages table's row order."""
    keep = pc.is_in(attempt_keys(stages), value_set=pa.array(attempt_keys(trials).to_pylist(), pa.string()))
    if stage is not None:
        keep = pc.and_(keep, pc.equal(stages["stage"], stage))
    return stages.filter(pc.fill_null(keep, False))


_STAGE_KEYS = ["sweep_id", "trial_id", "attempt", "stage"]


def load_stages(output_dir: Path | str, sweep_id: str | None = None, *, stage: str | None = None,
                scored_only: bool = True, all_attempts: bool = False, columns: list[str] | None = None,
                to: Frame = "arrow") -> Any:
    """The stages rows of the trials `load_trials` returns with the same arguments (their
    current attempts, scored only by default), of one `stage` or all.

    Shape: STAGES_SCHEMA columns, or only `columns` (in that order: reading a few columns skips
    the log heads and tails), one row per stage per attempt. `to` and errors: load_trials; a
    column STAGES_SCHEMA lacks raises RebRayError naming it.
    """
    if to not in FRAMES:
        raise RebRayError(f"to={to!r}: expected one of {', '.join(FRAMES)}")
    unknown = [c for c in columns or [] if c not in STAGES_SCHEMA.names]
    if unknown:
        raise RebRayError(f"columns: {unknown[0]!r} is not a stages column")
    output_dir = _check_run(Path(output_dir))
    trials = load_trials(output_dir, sweep_id, scored_only=scored_only, all_attempts=all_attempts)
    read = None if columns is None else list(dict.fromkeys(_STAGE_KEYS + list(columns)))
    stages = stages_of(read_stages(output_dir, sweep_id, columns=read), trials, stage)
    return _convert(stages if columns is None else stages.select(columns), to)
