"""The summary of a Harbor sweep (`reb-ray sweep --suite harbor:PATH`): its trials carry a
reward from the task's own verifier, not reb-ray's stages, so C0..C5 do not apply.

Per (sweep, agent), over each trial's current attempt (`latest_attempts`): the trials, how many
hold a reward, the mean reward with its 95% bootstrap interval (`bootstrap_mean` over the tasks'
mean rewards: the task is the unit resampled, as for the stage rates), the mean of every other
metric of reward.json (`reward_<key>`, `reb_ray.results.read.reward_columns`), the mean agent
seconds, the summed cost (null when no trial knows its own) and the failures by owner (agent,
hardware; infra: attempts that were never scored). Reads Parquet columns only.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from reb_ray.results.read import latest_attempts, reward_columns
from reb_ray.terminal import printable

from .columns import table
from .estimators import bootstrap_mean

HARBOR_PREFIX = "harbor:"
HEADERS = ("agent", "trials", "rewarded", "mean reward", "95% interval", "agent s", "cost $", "failed: agent",
           "hardware", "infra")
LEGEND = ("mean reward: over the trials whose verifier wrote a usable reward (rewarded); 95% interval: bootstrap\n"
          "over tasks (each task's mean reward, tasks resampled). reward_<key>: the mean of each other metric of\n"
          "reward.json. agent s: mean agent-phase seconds; cost $: the LLM cost the proxy counted (0: no model).\n"
          "failed: the current attempts failed as the agent's (no usable reward), the hardware's (too few GPUs),\n"
          "or left unscored by the infrastructure.")


def harbor_rows(trials: pa.Table) -> pa.Table:
    """The rows of `trials` that are Harbor trials (their suite is `harbor:PATH`)."""
    if "suite" not in trials.column_names or not trials.num_rows:
        return trials.slice(0, 0)
    mask = [bool(s) and s.startswith(HARBOR_PREFIX) for s in trials.column("suite").to_pylist()]
    return trials.filter(pa.array(mask, pa.bool_()))


def split_harbor(trials: pa.Table) -> tuple[pa.Table, pa.Table]:
    """(the Harbor trials, the rest) of `trials`, split by whole sweeps: a sweep that holds a
    Harbor trial is a Harbor sweep, every one of its rows goes with it (its C0..C5 do not apply)."""
    import pyarrow.compute as pc

    harbor = harbor_rows(trials)
    if not harbor.num_rows:
        return harbor, trials
    ids = pc.is_in(trials.column("sweep_id"), value_set=pc.unique(harbor.column("sweep_id")))
    return trials.filter(ids), trials.filter(pc.invert(ids))


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def reward_summary(trials: pa.Table) -> list[dict[str, Any]]:
    """One dict per (sweep, agent) of Harbor `trials` (module docstring), in first-seen order:
    sweep_id, suite, agent, trials, rewarded, mean_reward, interval ((low, high) or None),
    metrics ({key: mean}, the same keys in every dict: those of any row, null where a group has
    none), agent_s, cost_usd, cost_known, failed_agent, failed_hardware, infra."""
    if not trials.num_rows:
        return []
    current = reward_columns(latest_attempts(trials)).to_pylist()
    metric_keys = sorted({k[len("reward_"):] for row in current for k in row if k.startswith("reward_")} - {"reward"})
    groups: dict[tuple, list[dict]] = {}
    for row in current:
        groups.setdefault((row["sweep_id"], row["agent"]), []).append(row)
    out = []
    for (sweep_id, agent), rows in groups.items():
        scored = [r for r in rows if r["status"] == "scored"]
        rewarded = [r for r in scored if r.get("reward") is not None]
        by_task: dict[str, list[float]] = {}
        for r in rewarded:
            by_task.setdefault(r["task_id"], []).append(r["reward"])
        task_means = [sum(v) / len(v) for v in by_task.values()]
        costs = [r["cost_usd"] for r in scored if r.get("cost_usd") is not None]
        out.append({
            "sweep_id": sweep_id, "suite": rows[0].get("suite"), "agent": agent, "trials": len(rows), "rewarded": len(rewarded),
            "mean_reward": _mean([r["reward"] for r in rewarded]),
            "interval": bootstrap_mean(task_means) if task_means else None,
            "metrics": {key: _mean([r[f"reward_{key}"] for r in rewarded if r.get(f"reward_{key}") is not None])
                        for key in metric_keys},
            "agent_s": _mean([r["agent_wall_time_s"] for r in scored if r.get("agent_wall_time_s") is not None]),
            "cost_usd": sum(costs) if costs else None, "cost_known": len(costs),
            "failed_agent": sum(r.get("failure_owner") == "agent" for r in scored),
            "failed_hardware": sum(r.get("failure_owner") == "hardware" for r in scored),
            "infra": sum(r["status"] != "scored" for r in rows),
        })
    return out


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def row_cells(row: dict[str, Any]) -> list[str]:
    """The table's cells (HEADERS order, then one per metric) of one `reward_summary` row."""
    interval = row["interval"]
    cost = _fmt(row["cost_usd"], ".4f")
    if row["cost_usd"] is not None and row["cost_known"] < row["trials"]:
        cost += f" ({row['cost_known']}/{row['trials']})"
    return [row["agent"], str(row["trials"]), str(row["rewarded"]), _fmt(row["mean_reward"], ".3f"),
            f"[{interval[0]:.3f}, {interval[1]:.3f}]" if interval else "-", _fmt(row["agent_s"], ".2f"), cost,
            str(row["failed_agent"]), str(row["failed_hardware"]), str(row["infra"]),
            *(_fmt(value, ".3f") for value in row["metrics"].values())]


def _cell(text: str) -> str:
    """A cell as the terminal may print it: control characters (an escape sequence in a
    reward.json key or an agent's name) and line breaks shown as escapes."""
    return printable(text).replace("\n", "\\n").replace("\t", "\\t")


def format_rewards(rows: list[dict[str, Any]]) -> str:
    """Plain-text tables of `reward_summary` rows, one block per sweep headed `sweep <id>
    (Harbor tasks)`, then LEGEND; "no trials" for none. Every cell and header goes through
    `_cell`: the names come from the task's verifier and the sweep's configuration."""
    if not rows:
        return "no trials"
    blocks = []
    sweeps: dict[str, list[dict]] = {}
    for row in rows:
        sweeps.setdefault(row["sweep_id"], []).append(row)
    for sweep_id, group in sweeps.items():
        headers = [*HEADERS, *(f"reward_{key}" for key in group[0]["metrics"])]
        blocks.append(f"sweep {_cell(str(sweep_id))} (Harbor tasks)\n"
                      + table([_cell(h) for h in headers], [[_cell(c) for c in row_cells(r)] for r in group], indent=""))
    return "\n\n".join(blocks) + "\n\n" + LEGEND
