"""The Harbor sweep's reward table (analysis.rewards) on trials rows as the sink writes them."""

from __future__ import annotations

import json

import pyarrow as pa

from analysis.rewards import format_rewards, harbor_rows, reward_summary
from reb_ray.results.read import reward_columns


def _row(agent: str, task: str, attempt: int = 1, reward: float | None = None, status: str = "scored",
         owner: str | None = None, suite: str = "harbor:/tasks", cost: float | None = 0.0, **metrics) -> dict:
    rewards = {"reward": reward, **metrics} if reward is not None else None
    return {"sweep_id": "s", "trial_id": f"{agent}/{task}/0", "attempt": attempt, "status": status, "agent": agent,
            "task_id": task, "suite": suite, "reward": reward, "rewards": json.dumps(rewards) if rewards else None,
            "cost_usd": cost, "agent_wall_time_s": 2.0, "failure_owner": owner}


def test_reward_columns_spread_each_key_and_leave_the_unknown_null():
    table = pa.Table.from_pylist([_row("a", "t1", reward=1.0, passed=3), _row("a", "t2"),
                                  {**_row("a", "t3"), "rewards": "not json"}])
    spread = reward_columns(table)
    assert spread.column("reward_passed").to_pylist() == [3.0, None, None]
    assert "reward_reward" in spread.column_names and spread.column("reward").to_pylist() == [1.0, None, None]
    assert reward_columns(table.drop_columns(["rewards"])).column_names == table.drop_columns(["rewards"]).column_names


def test_the_mean_reward_counts_current_attempts_with_a_reward_and_owners_apart():
    trials = pa.Table.from_pylist([
        _row("oracle", "t1", reward=1.0, passed=2), _row("oracle", "t2", reward=0.5, passed=1),
        _row("oracle", "t3", owner="hardware"),
        _row("noop", "t1", attempt=1, status="infra_error", owner="infra"), _row("noop", "t1", attempt=2, reward=0.0),
        _row("noop", "t2", owner="agent"), _row("noop", "t3", status="infra_error", owner="infra", cost=None),
        _row("heuristic", "numpy", suite="demo"),
    ])
    harbor = harbor_rows(trials)
    assert harbor.num_rows == 7
    oracle, noop = reward_summary(harbor)
    assert (oracle["trials"], oracle["rewarded"], oracle["mean_reward"]) == (3, 2, 0.75)
    assert oracle["failed_hardware"] == 1 and oracle["metrics"] == {"passed": 1.5}
    low, high = oracle["interval"]
    assert 0.5 <= low <= 0.75 <= high <= 1.0
    # noop/t1: the scored second attempt is current (the infra one is not counted); t3 never scored
    assert (noop["trials"], noop["rewarded"], noop["mean_reward"], noop["failed_agent"], noop["infra"]) == (3, 1, 0.0, 1, 1)
    text = format_rewards(reward_summary(harbor))
    assert "sweep s (Harbor tasks)" in text and "[0.000, 0.000]" in text and "reward_passed" in text


def test_the_terminal_table_shows_control_characters_of_a_key_or_a_name_as_escapes():
    trials = pa.Table.from_pylist([_row("evil\x1b[2J", "t1", reward=1.0, **{"k\x1b]0;x\x07\nnext": 2})])
    text = format_rewards(reward_summary(harbor_rows(trials)))
    assert "\x1b" not in text and "\x07" not in text
    assert "evil\\x1b[2J" in text and "reward_k\\x1b]0;x\\x07\\nnext" in text
    header = next(line for line in text.splitlines() if line.startswith("agent"))
    assert header.endswith("reward_k\\x1b]0;x\\x07\\nnext")  # the key's line break does not split the table
