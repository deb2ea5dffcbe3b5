"""Per-stage outcome distribution per agent, and probe-phase time, from the trials dataset.

Reads only Parquet (through `read_trials`). Only each trial's current scored attempt counts
(`reb_ray.results.read.latest_attempts`). A stage's outcome is `analysis.outcomes.stage_outcome`:
success, failure (the agent's), hardware (failed for lack of GPUs: owner hardware, shown apart
from the agent's failures), not_run (applicable, unmeasured), skipped (the task does not apply
it); a null status (a stage the row predates) is shown as "-".
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict

import pyarrow as pa

from .outcomes import OUTCOMES, stage_outcome
from .scores import current_scored

STAGES = ("c0", "c1", "c2", "c3", "c4", "c5", "env_size")

Key = tuple  # (sweep_id, agent)


def stage_distribution(trials: pa.Table) -> dict[Key, dict[str, Counter]]:
    """{(sweep_id, agent): {stage: Counter(outcome or "-" -> trials)}} over current scored
    attempts; stages are STAGES ("c0" .. "c5", "env_size"), outcomes OUTCOMES."""
    out: dict[Key, dict[str, Counter]] = defaultdict(lambda: defaultdict(Counter))
    for row in current_scored(trials):
        for stage in STAGES:
            out[(row["sweep_id"], row["agent"])][stage][stage_outcome(row, stage) or "-"] += 1
    return out


def median_probe_time(trials: pa.Table) -> dict[Key, float | None]:
    """{(sweep_id, agent): median probe-phase seconds over current scored attempts with a value}."""
    times: dict[Key, list[float]] = defaultdict(list)
    for row in current_scored(trials):
        if row.get("probe_wall_time_s") is not None:
            times[(row["sweep_id"], row["agent"])].append(row["probe_wall_time_s"])
    return {key: statistics.median(v) for key, v in times.items() if v}


def format_distribution(trials: pa.Table) -> str:
    """A text block per (sweep, agent): one line per stage with the trials per outcome."""
    dist, probe = stage_distribution(trials), median_probe_time(trials)
    columns = (*OUTCOMES, "-")
    blocks = []
    for key in sorted(dist, key=lambda k: tuple((v is None, v or "") for v in k)):
        p = probe.get(key)
        lines = [f"sweep {key[0]}, agent {key[1]}: median probe phase " + (f"{p:.1f} s" if p is not None else "-"),
                 f"  {'stage':<8} " + " ".join(f"{s:>8}" for s in columns)]
        for stage in STAGES:
            counts = dist[key][stage]
            lines.append(f"  {stage:<8} " + " ".join(f"{counts.get(s, 0):>8}" for s in columns))
        blocks.append("\n".join(lines))
    if not blocks:
        return "no scored trials"
    return "\n\n".join(blocks) + "\n\nfailure: the agent's; hardware: failed for lack of GPUs, not the agent's."
