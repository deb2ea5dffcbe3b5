"""`--verify-exports`: after a sweep, export every success and prove it by rebuilding.

For each trial of the sweep whose current attempt is a success (`keep.is_success`: scored, a
command stage C1/C3/C4 passed), not verified before (no record of that sweep, trial and
attempt in `<output>/environments/verifications.jsonl`), `verify_exports` writes the export
(`reb_ray.environment.export.export`, without the kept image: the rebuild must come from the
recipe) to `<output>/environments/exports/<sweep>/<agent>__<task>__<index>/attempt-<n>/` and
verifies it (`reb_ray.sweep.env_verify.verify`: `docker build --no-cache`, the probe phase with
no agent, each stage compared with the source's). The verification's record goes to the
verifications dataset (env_verify does that) and so into the source trial's `trial show`.

A rebuild runs where the driver runs, so only successes whose node (the row's `node`) is this
host are verified here: the export's wheels and the sandbox image are that node's, and the
verification must run on the same kind of node. The others get a record `reproducible: not
attempted` saying which node holds them (run `reb-ray env export` and `reb-ray env verify`
there). An export that cannot be written is recorded the same way, with its one-line reason.
Successes are verified one at a time (each rebuild uses the node's CPUs and network).
"""

from __future__ import annotations

import shutil
import socket
import time
from pathlib import Path

from reb_ray.environment.keep import is_success
from reb_ray.errors import RebRayError
from reb_ray.results.verifications import append_verification, attempt_key, read_verifications

EXPORTS = "environments/exports"
STAGES = ("c0", "c1", "c2", "c3", "c4", "c5")


def verified_before(output: Path) -> set[tuple[str, str, int]]:
    """(sweep, trial, attempt) of every record in the output's verifications dataset (a line
    that is not JSON is skipped: an interrupted append)."""
    return {attempt_key(record) for record in read_verifications(output) or []}


def successes(output: Path, sweep_id: str) -> list[dict]:
    """The sweep's current attempts that are successes, in trial order."""
    from reb_ray.results.read import latest_attempts, read_trials

    rows = latest_attempts(read_trials(output, sweep_id)).to_pylist()
    out = []
    for row in rows:
        stages = [{"stage": s, "status": row.get(f"{s}_status")} for s in STAGES]
        if is_success(row, stages):
            out.append(row)
    return sorted(out, key=lambda r: r["trial_id"])


def export_dir(output: Path, row: dict) -> Path:
    """Where `row`'s export is written under `output` (module docstring)."""
    return Path(output) / EXPORTS / row["sweep_id"] / row["trial_id"].replace("/", "__") / f"attempt-{row['attempt']}"


def _not_attempted(output: Path, row: dict, why: str) -> dict:
    record = {"sweep_id": row["sweep_id"], "trial_id": row["trial_id"], "attempt": row["attempt"],
              "task_id": row["task_id"], "built": None, "reproducible": None, "differs": None,
              "verdict": f"reproducible: not attempted ({why})", "source_agent_wall_time_s": row.get("agent_wall_time_s")}
    append_verification(output, record)
    return record


def verify_exports(output: Path, sweep_id: str, tasks_root: Path | None = None, mirrors: list[Path] | None = None,
                   progress=None) -> list[dict]:
    """Export and verify the sweep's successes not verified before (module docstring); returns
    their records in trial order. `progress(line)` is told of each one as it ends."""
    from reb_ray.environment.export import export
    from reb_ray.sweep.env_verify import verify

    output = Path(output)
    done = verified_before(output)
    host = socket.gethostname()
    records = []
    for row in successes(output, sweep_id):
        if (row["sweep_id"], row["trial_id"], row["attempt"]) in done:
            continue
        started = time.monotonic()
        if row.get("node") not in (None, host):
            record = _not_attempted(output, row, f"its environment was built on node {row['node']}, not on this "
                                                 f"host {host}: export and verify it there")
        else:
            out = export_dir(output, row)
            shutil.rmtree(out, ignore_errors=True)  # an earlier run's, interrupted before its record
            try:
                export(output, row["trial_id"], out, attempt=row["attempt"], sweep_id=row["sweep_id"],
                       tasks_root=tasks_root, mirrors=mirrors or [])
                record = verify(out, tasks_root=tasks_root, mirrors=mirrors)
            except RebRayError as exc:
                record = _not_attempted(output, row, f"export failed: {exc}")
            record["export"] = str(out)
        record["verify_s"] = time.monotonic() - started
        records.append(record)
        if progress is not None:
            progress(f"{row['trial_id']} attempt {row['attempt']}: {record['verdict']}" + _ratio(record))
    return records


def _ratio(record: dict) -> str:
    """" (rebuild 21.0 s = 0.55x the agent phase's 38.2 s)", or "" when either is unknown."""
    build, source = record.get("build_s"), record.get("source_agent_wall_time_s")
    if not build or not source:
        return ""
    return f" (rebuild {build:.1f} s = {build / source:.2f}x the agent phase's {source:.1f} s)"
