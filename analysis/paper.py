"""A summary per (sweep, agent) with the column names of the paper's release, plus ours.

Release columns (ResearchEnvBench, `No-518/ResearchEnvBench` summary CSV): c0_missing_over_total,
c1_cpu_success_over_all ... c4_multi_gpu_success_over_all as "successes/denominator",
c5_path_sum, c5_version_sum, c5_capability_sum, agent_wall_time_avg_sec, env_size_avg_gb and
token columns. Denominators: the scored trials where the stage applies (not `skipped`), so a
stage that never ran (`not_run`) still counts against the agent, as in the paper; our extra
columns show how many did not run, infra errors and under-claims. Reads Parquet rows only.
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict

import pyarrow as pa

STAGES = (("c1", "c1_cpu_success_over_all"), ("c2", "c2_cuda_success_over_all"),
          ("c3", "c3_single_gpu_success_over_all"), ("c4", "c4_multi_gpu_success_over_all"))
COLUMNS = ["sweep_id", "agent", "trials", "c0_missing_over_total", *(c for _, c in STAGES), "c5_path_sum", "c5_version_sum",
           "c5_capability_sum", "agent_wall_time_avg_sec", "env_size_avg_gb", "input_tokens", "output_tokens",
           "c0_not_run", "c1_not_run", "c2_not_run", "c3_not_run", "c4_not_run", "infra_errors", "c5_underclaims_sum"]


def _mean(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def paper_summary(trials: pa.Table) -> list[dict]:
    """One dict per (sweep_id, agent) with COLUMNS as keys; unknown values are None."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for row in trials.to_pylist():
        groups[(row["sweep_id"], row["agent"])].append(row)
    out = []
    for (sweep_id, agent), rows in sorted(groups.items()):
        scored = [r for r in rows if r["status"] == "scored"]
        c0_missing = sum(r["c0_missing"] or 0 for r in scored)
        c0_total = sum(r["c0_total"] or 0 for r in scored)
        summary = {"sweep_id": sweep_id, "agent": agent, "trials": len(scored),
                   "c0_missing_over_total": f"{c0_missing}/{c0_total}",
                   "infra_errors": sum(r["status"] == "infra_error" for r in rows)}
        for stage, column in STAGES:
            applicable = [r for r in scored if r.get(f"{stage}_status") not in ("skipped", None)]
            ok = sum(r[f"{stage}_status"] == "success" for r in applicable)
            summary[column] = f"{ok}/{len(applicable)}"
            summary[f"{stage}_not_run"] = sum(r.get(f"{stage}_status") == "not_run" for r in scored)
        summary["c0_not_run"] = sum(r.get("c0_status") == "not_run" for r in scored)
        for key in ("c5_path", "c5_version", "c5_capability", "c5_underclaims"):
            summary[f"{key}_sum"] = sum(r.get(key) or 0 for r in scored)
        summary["agent_wall_time_avg_sec"] = _mean([r["agent_wall_time_s"] for r in scored])
        size = _mean([r["env_size_bytes"] for r in scored])
        summary["env_size_avg_gb"] = None if size is None else size / 1e9
        summary["input_tokens"] = summary["output_tokens"] = None  # not recorded yet: unknown, never 0
        out.append({c: summary.get(c) for c in COLUMNS})
    return out


def to_csv(rows: list[dict]) -> str:
    """The rows as CSV text with a header of COLUMNS."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()
