"""Per-agent summary of a `trials` table: the paper's C0/C1 counts plus cost and infra columns.

Reads results only through `reb_ray.results.read` (Parquet) and pyarrow; it uses no other
harness state, so it works on any copy of an output directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from reb_ray.results.read import read_trials

_NEEDED = (
    "sweep_id",
    "trial_id",
    "attempt",
    "agent",
    "status",
    "c0_status",
    "c0_missing",
    "c0_total",
    "c1_status",
    "agent_wall_time_s",
    "env_size_bytes",
)


def _sum(values: list[Any]) -> Any:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _mean(values: list[Any]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def _sort_key(key: tuple[str | None, str | None]) -> tuple:
    return tuple((v is None, v or "") for v in key)


def summarize(trials: pa.Table) -> list[dict]:
    """One summary dict per (sweep_id, agent) of a TRIALS_SCHEMA table, sorted by both.

    Scores use only rows with status == "scored"; when one trial_id has several scored
    attempts, only its highest attempt counts (a trial is scored once). Keys:
    sweep_id, agent;
    trials: scored trials;
    c0_missing: sum of c0_missing (None when no scored trial has a value);
    c0_total: sum of c0_total over all scored trials, whether or not C0 ran (the paper's
      denominator; None when no value);
    c0_not_run: scored trials with c0_status == "not_run";
    c1_passed: c1_status == "success"; c1_applicable: c1_status != "skipped" (a null status
      counts as applicable); c1_not_run: c1_status == "not_run";
    mean_agent_wall_time_s (seconds), mean_env_size_bytes (bytes): means over scored trials
      with a value, None when none has one;
    infra_errors: rows (attempts) with status == "infra_error".
    A (sweep_id, agent) pair with only unscored rows still appears, with trials == 0.
    Raises ValueError naming the columns `trials` lacks.
    """
    missing = [c for c in _NEEDED if c not in trials.column_names]
    if missing:
        raise ValueError(f"trials table lacks column(s): {', '.join(missing)}")
    rows = trials.select(list(_NEEDED)).to_pylist()

    groups: dict[tuple, dict[str, Any]] = {}
    scored: dict[tuple, dict[str | None, dict]] = {}
    for row in rows:
        key = (row["sweep_id"], row["agent"])
        group = groups.setdefault(key, {"infra_errors": 0})
        by_trial = scored.setdefault(key, {})
        if row["status"] == "infra_error":
            group["infra_errors"] += 1
        elif row["status"] == "scored":
            previous = by_trial.get(row["trial_id"])
            if previous is None or (row["attempt"] or 0) > (previous["attempt"] or 0):
                by_trial[row["trial_id"]] = row

    out: list[dict] = []
    for key in sorted(groups, key=_sort_key):
        picked = list(scored[key].values())
        c1 = [r["c1_status"] for r in picked]
        out.append(
            {
                "sweep_id": key[0],
                "agent": key[1],
                "trials": len(picked),
                "c0_missing": _sum([r["c0_missing"] for r in picked]),
                "c0_total": _sum([r["c0_total"] for r in picked]),
                "c0_not_run": sum(r["c0_status"] == "not_run" for r in picked),
                "c1_passed": sum(s == "success" for s in c1),
                "c1_applicable": sum(s != "skipped" for s in c1),
                "c1_not_run": sum(s == "not_run" for s in c1),
                "mean_agent_wall_time_s": _mean([r["agent_wall_time_s"] for r in picked]),
                "mean_env_size_bytes": _mean([r["env_size_bytes"] for r in picked]),
                "infra_errors": groups[key]["infra_errors"],
            }
        )
    return out


_HEADERS = (
    "agent",
    "trials",
    "C0 missing/total",
    "C0 not run",
    "C1 passed/applicable",
    "C1 not run",
    "mean agent s",
    "mean env MB",
    "infra",
)


def _fmt(value: Any, spec: str = "") -> str:
    return "-" if value is None else format(value, spec)


def _cells(row: dict) -> list[str]:
    env = row["mean_env_size_bytes"]
    return [
        _fmt(row["agent"]),
        str(row["trials"]),
        f"{_fmt(row['c0_missing'])}/{_fmt(row['c0_total'])}",
        str(row["c0_not_run"]),
        f"{row['c1_passed']}/{row['c1_applicable']}",
        str(row["c1_not_run"]),
        _fmt(row["mean_agent_wall_time_s"], ".1f"),
        _fmt(None if env is None else env / 1e6, ".1f"),
        str(row["infra_errors"]),
    ]


def format_summary(rows: list[dict]) -> str:
    """Plain-text table of `summarize` output, one block per sweep headed `sweep <id>`.

    Columns: agent, trials, C0 missing/total, C0 not run, C1 passed/applicable, C1 not run,
    mean agent s (seconds), mean env MB (10**6 bytes), infra (infra_error attempts). Unknown
    values print as "-". No rows gives "no trials".
    """
    if not rows:
        return "no trials"
    blocks: list[str] = []
    sweeps: dict[Any, list[dict]] = {}
    for row in rows:
        sweeps.setdefault(row["sweep_id"], []).append(row)
    for sweep_id, group in sweeps.items():
        table = [list(_HEADERS)] + [_cells(r) for r in group]
        widths = [max(len(line[i]) for line in table) for i in range(len(_HEADERS))]
        lines = [f"sweep {_fmt(sweep_id)}"]
        for n, line in enumerate(table):
            lines.append(
                "  ".join(
                    cell.ljust(w) if i == 0 else cell.rjust(w)
                    for i, (cell, w) in enumerate(zip(line, widths))
                ).rstrip()
            )
            if n == 0:
                lines.append("  ".join("-" * w for w in widths))
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def print_summary(output_dir: Path, sweep_id: str | None = None) -> str:
    """Read `output_dir`'s trials (one sweep or all), print the summary table and return it.

    Raises reb_ray.errors.RebRayError for an unreadable or foreign results shard.
    """
    text = format_summary(summarize(read_trials(Path(output_dir), sweep_id)))
    print(text)
    return text
