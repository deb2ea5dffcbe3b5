"""A small hand-made Harbor sweep (`h1`, suite `harbor:/tasks`), rows as the sink writes them,
alone or beside the reb-ray sweep of tests.analysis.runs (`s1`): shared by the reward table's
CSV, page and command-line tests. Every number the tests expect is derived by hand from ROWS.

oracle: a 1.0 (passed 3), b 0.5 after an infra attempt (passed 1), c the hardware's (too few
GPUs): 3 trials, 2 rewarded, mean 0.75, agent time (75.5 + 4.5) / 2 = 40.0 s, cost 0 of 3.
command: a 1/3 (no `passed`; cost unknown, 3600 s), b no reward (the agent's, cost 0.0123,
7200 s), c never scored (infra): 3 trials, 1 rewarded, mean 1/3, 5400 s, cost 0.0123 of 1.
HOSTILE (an agent name of markup) on a, 0.25, with a metric whose key is markup (HOSTILE_KEY).
"""

from __future__ import annotations

import json
from pathlib import Path

from reb_ray.testing.rows import trial_row

from .runs import ROWS as REB_RAY_ROWS
from .runs import write_run

SWEEP = "h1"
SUITE = "harbor:/tasks"
HOSTILE = '<img src=x onerror="alert(1)">'
HOSTILE_KEY = "<script>alert('k')</script>"


def harbor_row(agent: str, task: str, attempt: int = 1, status: str = "scored", *, reward: float | None = None,
               metrics: dict | None = None, **values) -> dict:
    """A trials row of a Harbor trial: `reward` and the reward.json `metrics` beside it."""
    rewards = None if reward is None else json.dumps({"reward": reward, **(metrics or {})}, sort_keys=True)
    return trial_row(agent, task, attempt, status, sweep=SWEEP, suite=SUITE, reward=reward, rewards=rewards,
                     harbor_image=f"reb-ray/harbor-env:{task}-0123", harbor_build_s=1.5, **values)


ROWS = [
    harbor_row("oracle", "a", reward=1.0, metrics={"passed": 3}, agent_wall_time_s=75.5, cost_usd=0.0),
    harbor_row("oracle", "b", 1, "infra_error", failure_owner="infra", failure_category="infra_sandbox"),
    harbor_row("oracle", "b", 2, reward=0.5, metrics={"passed": 1}, agent_wall_time_s=4.5, cost_usd=0.0),
    harbor_row("oracle", "c", failure_owner="hardware", failure_category="insufficient_hardware", cost_usd=0.0),
    harbor_row("command", "a", reward=1 / 3, agent_wall_time_s=3600.0, cost_usd=None),
    harbor_row("command", "b", failure_owner="agent", failure_category="reward_missing", agent_wall_time_s=7200.0,
               cost_usd=0.0123),
    harbor_row("command", "c", 1, "infra_error", failure_owner="infra", failure_category="infra_sandbox"),
    harbor_row(HOSTILE, "a", reward=0.25, metrics={HOSTILE_KEY: 7}, agent_wall_time_s=1.0, cost_usd=0.0),
]


def write_harbor_run(output_dir: Path) -> Path:
    """The Harbor sweep alone, written with the real sink."""
    return write_run(output_dir, ROWS)


def write_mixed_run(output_dir: Path) -> Path:
    """The reb-ray sweep `s1` and the Harbor sweep `h1` in one results directory."""
    return write_run(output_dir, REB_RAY_ROWS + ROWS)
