"""The Harbor sweeps' reward table as the HTML report shows it: the numbers of the terminal's
table (`analysis.rewards.reward_summary`) written for reading (`analysis.readable`: cost in
dollars to the cent, agent time with its units; rewards to three decimals, as the terminal).
The values are plain strings; the template escapes them."""

from __future__ import annotations

from typing import Any

from .readable import money, seconds

HEADERS = ("agent", "trials", "rewarded", "mean reward", "95% interval", "agent time", "cost", "failed: agent",
           "hardware", "infra")
LEGEND = ("mean reward: over the trials whose verifier wrote a usable reward (rewarded); 95% interval: bootstrap "
          "over tasks (each task's mean reward, tasks resampled). reward_<key>: the mean of each other metric of "
          "reward.json. agent time: the mean agent phase; cost: the LLM cost the proxy counted, summed ($0.00: no "
          "model; '(k/n priced)': k of n trials know it; '-': none does). failed: the current attempts failed as the "
          "agent's (no usable reward), the hardware's (too few GPUs), or left unscored by the infrastructure. "
          "The CSV (`reb-ray report --csv`) holds the same numbers unrounded.")


def _reward(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def page_cells(row: dict[str, Any], keys: list[str] | None = None) -> list[str]:
    """The cells (HEADERS order, then one per metric of `keys`, default all) of one
    `reward_summary` row."""
    interval = row["interval"]
    cost = money(row["cost_usd"])
    if row["cost_usd"] is not None and row["cost_known"] < row["trials"]:
        cost += f" ({row['cost_known']}/{row['trials']} priced)"
    return [str(row["agent"]), str(row["trials"]), str(row["rewarded"]), _reward(row["mean_reward"]),
            f"[{interval[0]:.3f}, {interval[1]:.3f}]" if interval else "-", seconds(row["agent_s"]), cost,
            str(row["failed_agent"]), str(row["failed_hardware"]), str(row["infra"]),
            *(_reward(row["metrics"].get(key)) for key in (row["metrics"] if keys is None else keys))]


def page_sweeps(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One dict per Harbor sweep, in first-seen order: id, suite, headers (HEADERS, then each
    metric's `reward_<key>` that some agent of the sweep has) and rows (`page_cells`)."""
    sweeps: dict[Any, list[dict]] = {}
    for row in rows:
        sweeps.setdefault(row["sweep_id"], []).append(row)
    out = []
    for sweep_id, group in sweeps.items():
        keys = [k for k in group[0]["metrics"] if any(r["metrics"][k] is not None for r in group)]
        out.append({"id": sweep_id, "suite": group[0].get("suite"),
                    "headers": [*HEADERS, *(f"reward_{k}" for k in keys)],
                    "rows": [page_cells(row, keys) for row in group]})
    return out
