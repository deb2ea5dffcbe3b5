"""Attempts' trajectories as ATIF documents (reb_ray.llm.atif) from a results directory: one for
the viewer's pages, all of a run for `reb-ray export-trajectories`.

An attempt's own `trajectory.json` (the trials row's `atif_path`, written when it ran) is read
first; a run written before attempts wrote one (or whose file is gone or unreadable) gets its
document built here from the stored transcript and request log, by the same rules."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from reb_ray.trial.artifacts import ARTIFACTS_DIR, artifact_dir
from reb_ray.llm.atif import trajectory, validate
from reb_ray.results.read import latest_attempts, read_trials
from reb_ray.viewer.data import Forbidden, NotFound, Run

#: Bytes of a transcript or request log read to build a trajectory (the size the harness keeps).
READ_LIMIT = 64 * 1024 * 1024
#: The trials columns a trajectory is built from.
COLUMNS = ["sweep_id", "trial_id", "attempt", "status", "task_id", "agent", "agent_kind", "agent_version",
           "agent_model", "llm_model", "prompt_sha256", "agent_exit_code", "input_tokens", "output_tokens",
           "cached_input_tokens", "cost_usd", "trajectory_path", "llm_log_path", "agent_output_tail", "atif_path"]
#: Bytes of a trajectory.json read (a larger one is treated as unreadable and rebuilt).
ATIF_READ_LIMIT = 256 * 1024 * 1024
FILE_NAME = "trajectory.json"


def read_artifact(run: Run, rel: str | None) -> bytes | None:
    """A gzip artifact's content (at most READ_LIMIT bytes), None when not named, not there,
    outside the artifacts directory, or unreadable."""
    if not rel:
        return None
    try:
        with gzip.open(run.artifact(rel), "rb") as f:
            return f.read(READ_LIMIT)
    except (NotFound, Forbidden, OSError, EOFError):
        return None


def stored(run: Run, rel: str | None) -> dict | None:
    """The attempt's own trajectory.json, parsed; None when not named, not there, outside the
    artifacts directory, too large, or not a JSON object."""
    if not rel:
        return None
    try:
        with open(run.artifact(rel), "rb") as f:
            data = f.read(ATIF_READ_LIMIT + 1)
        doc = json.loads(data) if len(data) <= ATIF_READ_LIMIT else None
    except (NotFound, Forbidden, OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def of_attempt(run: Run, row: dict) -> dict:
    """The ATIF document of the attempt whose trials row is `row` (the module docstring's order)."""
    doc = stored(run, row.get("atif_path"))
    if doc is not None:
        return doc
    return trajectory(row, read_artifact(run, row.get("trajectory_path")), read_artifact(run, row.get("llm_log_path")))


def export(output_dir: Path, dest: Path, sweep_id: str | None = None) -> tuple[int, list[str]]:
    """Write the ATIF document of every trial's current attempt under `dest`, at
    `<dest>/<the attempt's artifact directory below artifacts/>/trajectory.json`. Returns
    (files written, problems: one line per document the validator faulted, which is written
    all the same). Raises RebRayError for a directory without results."""
    run = Run(Path(output_dir))
    rows = latest_attempts(read_trials(run.output_dir, sweep_id, columns=COLUMNS)).to_pylist()
    written, problems = 0, []
    for row in rows:
        doc = of_attempt(run, row)
        for error in validate(doc)[:3]:
            problems.append(f"{row['trial_id']} attempt {row['attempt']}: {error}")
        rel = artifact_dir(row["sweep_id"], row["trial_id"], row["attempt"])[len(ARTIFACTS_DIR) + 1:]
        path = Path(dest) / rel / FILE_NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
        written += 1
    return written, problems
