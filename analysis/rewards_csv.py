"""The Harbor sweeps' reward table as CSV (`reb-ray report --csv`): the numbers of the terminal's
reward table (`analysis.rewards.reward_summary`), one line per (sweep, agent), exact.

Exact: floats as Python writes them back unchanged (no rounding), an unknown value (None) as an
empty cell, never 0. Columns, in order (REWARD_COLUMNS, then one per metric):

- sweep_id, suite (`harbor:PATH`), agent;
- trials: the agent's trials (each at its current attempt); rewarded: those whose verifier wrote
  a usable reward;
- mean_reward: the mean over the rewarded trials; mean_reward_ci_low, mean_reward_ci_high: its
  95% bootstrap interval over tasks (each task's mean reward, tasks resampled, seed 0);
- agent_wall_time_avg_sec: mean agent-phase seconds over the scored trials that know it;
- cost_usd_sum: the cost the metering proxy counted, summed over the scored trials that know it
  (0: no model; empty: none knows it); cost_valid_jobs: how many knew it;
- failed_agent, failed_hardware: current scored attempts failed as the agent's (no usable
  reward) or the hardware's (too few GPUs); infra_errors: current attempts the infrastructure
  left unscored;
- reward_<key>: the mean of each other numeric metric of reward.json over the rewarded trials
  that have it, every key any sweep of the run wrote (empty where a sweep has none).

The paper's CSV keeps the release's master_summary.csv columns, whose tooling reads that file
by its columns; these are other columns, so a run with both kinds of sweep writes two files:
the paper's table at the path asked for and this one beside it (`rewards_path`). A run of
Harbor sweeps only writes this table at the path asked for: it is the run's whole report.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

REWARD_COLUMNS = ["sweep_id", "suite", "agent", "trials", "rewarded", "mean_reward", "mean_reward_ci_low",
                  "mean_reward_ci_high", "agent_wall_time_avg_sec", "cost_usd_sum", "cost_valid_jobs", "failed_agent",
                  "failed_hardware", "infra_errors"]
#: Inserted before the paper CSV's extension to name the reward table beside it.
SUFFIX = "-rewards"


def rewards_path(csv_path: Path) -> Path:
    """Where the reward table goes beside the paper's CSV at `csv_path`: the same directory and
    name with SUFFIX before the extension (`summary.csv` -> `summary-rewards.csv`)."""
    return csv_path.with_name(f"{csv_path.stem}{SUFFIX}{csv_path.suffix}")


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def csv_record(row: dict[str, Any]) -> dict[str, Any]:
    """One `reward_summary` row as {column: value} (REWARD_COLUMNS, then `reward_<key>`)."""
    interval = row["interval"]
    return {
        "sweep_id": row["sweep_id"], "suite": row.get("suite"), "agent": row["agent"], "trials": row["trials"],
        "rewarded": row["rewarded"], "mean_reward": _float(row["mean_reward"]),
        "mean_reward_ci_low": _float(interval[0]) if interval else None,
        "mean_reward_ci_high": _float(interval[1]) if interval else None,
        "agent_wall_time_avg_sec": _float(row["agent_s"]), "cost_usd_sum": _float(row["cost_usd"]),
        "cost_valid_jobs": row["cost_known"], "failed_agent": row["failed_agent"],
        "failed_hardware": row["failed_hardware"], "infra_errors": row["infra"],
        **{f"reward_{key}": _float(value) for key, value in row["metrics"].items()},
    }


def rewards_csv(rows: list[dict[str, Any]]) -> str:
    """`reward_summary` rows as CSV text: a header (REWARD_COLUMNS, then every metric's
    `reward_<key>` in key order), one line per row; None is an empty cell."""
    metrics = sorted({f"reward_{key}" for row in rows for key in row["metrics"]})
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=REWARD_COLUMNS + metrics, lineterminator="\n")
    writer.writeheader()
    writer.writerows(csv_record(row) for row in rows)
    return buf.getvalue()
