"""Row builders and run helpers shared by the results tests (real Parquet under tmp_path)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq

from reb_ray.results.parquet_sink import rows_to_table
from reb_ray.results.schema import STAGES_SCHEMA, TRIALS_SCHEMA
from reb_ray.testing.rows import stage_row, trial_row

STARTED = dt.datetime(2024, 5, 1, 12, 0, 0, tzinfo=dt.timezone.utc)


def trial(n: int, sweep: str = "s1", attempt: int = 1, **extra) -> dict:
    """agentA's trials row on task{n} (scored unless `extra` says otherwise)."""
    return trial_row("agentA", f"task{n}", attempt, extra.pop("status", "scored"), sweep=sweep, **extra)


def stage(n: int, sweep: str = "s1", attempt: int = 1, **extra) -> dict:
    """agentA's stages row on task{n} (C1, success, unless `extra` says otherwise)."""
    return stage_row("agentA", f"task{n}", extra.pop("stage", "c1"), extra.pop("status", "success"),
                     attempt=attempt, sweep=sweep, **extra)


def rich_trial(n: int, sweep: str = "s1", attempt: int = 1) -> dict:
    """A trial row with every kind of column filled: strings, ints with nulls, lists, timestamps."""
    return trial(n, sweep, attempt, status="scored" if n % 5 else "infra_error",
                 failure_owner=None if n % 3 else "agent", c0_missing=n % 7, c0_total=40,
                 c0_missing_modules=["torch", f"mod{n}"] if n % 2 else [], c1_exit_code=None if n % 4 == 0 else n % 2,
                 c4_exit_code=None if n % 2 else 0, agent_wall_time_s=12.5 + n, agent_timed_out=n % 9 == 0,
                 started_at=STARTED + dt.timedelta(seconds=n), agent_output_tail=f"tail of {n} " * 20,
                 cost_usd=None if n % 6 == 0 else 0.001 * n)


def rich_stages(n: int, sweep: str = "s1", attempt: int = 1) -> list[dict]:
    side = [{"path": "train.log", "size_bytes": 100 + n, "truncated": False, "text": "ok", "error": None}]
    return [stage(n, sweep, attempt, stage=name, exit_code=None if name == "c0" else n % 3, duration_s=1.5,
                  log_head=f"head {n} {name}", log_tail="tail", started_at=STARTED,
                  side_logs=side if name == "c3" else None)
            for name in ("c0", "c1", "c3")]


def write_legacy(output_dir: Path, trial_rows: list[dict], stage_rows: list[dict]) -> None:
    """Write rows the way the sink did before issue 12: one file per attempt per dataset under
    `<dataset>/sweep_id=<URI-encoded id>/part-<trial>-a<attempt>.parquet`."""
    for rows, schema, dataset in ((trial_rows, TRIALS_SCHEMA, "trials"), (stage_rows, STAGES_SCHEMA, "stages")):
        groups: dict[tuple, list[dict]] = {}
        for row in rows:
            groups.setdefault((row["sweep_id"], row["trial_id"], row["attempt"]), []).append(row)
        for (sweep, trial_id, attempt), group in groups.items():
            directory = output_dir / dataset / f"sweep_id={quote(sweep, safe='')}"
            directory.mkdir(parents=True, exist_ok=True)
            safe = trial_id.replace("/", "_")
            pq.write_table(rows_to_table(group, schema), directory / f"part-{safe}-a{attempt}.parquet")


def sorted_rows(table: pa.Table) -> list[dict]:
    """Rows as dicts in a canonical order (by sweep, trial, attempt, stage), to compare reads."""
    rows = table.to_pylist()
    return sorted(rows, key=lambda r: (r["sweep_id"], r["trial_id"] or "", r["attempt"] or 0, r.get("stage") or ""))


def data_files(output_dir: Path) -> list[Path]:
    """Every file under the datasets (trials, stages, index), whatever its name."""
    return sorted(p for d in ("trials", "stages", "index") for p in (output_dir / d).rglob("*") if p.is_file())
