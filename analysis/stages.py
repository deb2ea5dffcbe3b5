"""Per-stage status distribution per agent, and probe-phase time, from the trials dataset.

Reads only Parquet (through `read_trials`). Only scored attempts count; statuses are
success / failure / skipped / not_run, and null (a stage the row predates) is shown as "-".
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict

import pyarrow as pa

STAGE_COLUMNS = ("c0_status", "c1_status", "c2_status", "c3_status", "c4_status", "c5_status", "env_size_status")
STATUSES = ("success", "failure", "skipped", "not_run")


def stage_distribution(trials: pa.Table) -> dict[str, dict[str, Counter]]:
    """{agent: {stage column: Counter(status -> trials)}} over scored rows."""
    out: dict[str, dict[str, Counter]] = defaultdict(lambda: defaultdict(Counter))
    for row in trials.to_pylist():
        if row.get("status") != "scored":
            continue
        for column in STAGE_COLUMNS:
            out[row["agent"]][column][row.get(column) or "-"] += 1
    return out


def median_probe_time(trials: pa.Table) -> dict[str, float | None]:
    """{agent: median probe-phase seconds per scored trial} (None when no row has it)."""
    times: dict[str, list[float]] = defaultdict(list)
    for row in trials.to_pylist():
        if row.get("status") == "scored" and row.get("probe_wall_time_s") is not None:
            times[row["agent"]].append(row["probe_wall_time_s"])
    return {agent: statistics.median(v) if v else None for agent, v in times.items()}


def format_distribution(trials: pa.Table) -> str:
    """A text table: one line per agent and stage, with counts per status."""
    dist, probe = stage_distribution(trials), median_probe_time(trials)
    lines = [f"{'agent':<12} {'stage':<8} " + " ".join(f"{s:>8}" for s in (*STATUSES, "-")) + "  median probe s"]
    for agent in sorted(dist):
        for column in STAGE_COLUMNS:
            counts = dist[agent][column]
            stage = column.removesuffix("_status")
            p = probe.get(agent)
            lines.append(f"{agent:<12} {stage:<8} " + " ".join(f"{counts.get(s, 0):>8}" for s in (*STATUSES, "-"))
                         + (f"  {p:.1f}" if column == "c0_status" and p is not None else ""))
    return "\n".join(lines)
