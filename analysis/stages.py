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


Key = tuple  # (sweep_id, agent)


def stage_distribution(trials: pa.Table) -> dict[Key, dict[str, Counter]]:
    """{(sweep_id, agent): {stage column: Counter(status -> trials)}} over scored rows."""
    out: dict[Key, dict[str, Counter]] = defaultdict(lambda: defaultdict(Counter))
    for row in trials.to_pylist():
        if row.get("status") != "scored":
            continue
        for column in STAGE_COLUMNS:
            out[(row["sweep_id"], row["agent"])][column][row.get(column) or "-"] += 1
    return out


def median_probe_time(trials: pa.Table) -> dict[Key, float | None]:
    """{(sweep_id, agent): median probe-phase seconds per scored trial} (None when unknown)."""
    times: dict[Key, list[float]] = defaultdict(list)
    for row in trials.to_pylist():
        if row.get("status") == "scored" and row.get("probe_wall_time_s") is not None:
            times[(row["sweep_id"], row["agent"])].append(row["probe_wall_time_s"])
    return {key: statistics.median(v) if v else None for key, v in times.items()}


def format_distribution(trials: pa.Table) -> str:
    """A text block per (sweep, agent): one line per stage with counts per status."""
    dist, probe = stage_distribution(trials), median_probe_time(trials)
    blocks = []
    for key in sorted(dist):
        p = probe.get(key)
        lines = [f"sweep {key[0]}, agent {key[1]}: median probe phase " + (f"{p:.1f} s" if p is not None else "-"),
                 f"  {'stage':<8} " + " ".join(f"{s:>8}" for s in (*STATUSES, "-"))]
        for column in STAGE_COLUMNS:
            counts = dist[key][column]
            lines.append(f"  {column.removesuffix('_status'):<8} " + " ".join(f"{counts.get(s, 0):>8}" for s in (*STATUSES, "-")))
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)
