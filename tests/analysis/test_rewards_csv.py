"""analysis.rewards_csv on Harbor rows written with the real sink and read back: the terminal
table's numbers, exact, one line per agent; where the file goes beside the paper's CSV."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from analysis.estimators import bootstrap_mean
from analysis.rewards import format_rewards, reward_summary, split_harbor
from analysis.rewards_csv import REWARD_COLUMNS, rewards_csv, rewards_path
from reb_ray.results.read import read_trials

from .harbor_runs import HOSTILE, HOSTILE_KEY, SWEEP, write_mixed_run


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """(the reb-ray trials, the Harbor trials) of the mixed run, read back from Parquet."""
    harbor, rest = split_harbor(read_trials(write_mixed_run(tmp_path_factory.mktemp("rewards-csv") / "run")))
    return rest, harbor


def _records(text: str) -> tuple[list[str], dict[str, dict[str, str]]]:
    reader = csv.DictReader(io.StringIO(text))
    return reader.fieldnames, {r["agent"]: r for r in reader}


def test_a_mixed_run_splits_by_whole_sweeps(mixed):
    rest, harbor = mixed
    assert set(harbor.column("sweep_id").to_pylist()) == {SWEEP}
    assert set(rest.column("sweep_id").to_pylist()) == {"s1"} and rest.num_rows + harbor.num_rows == 17


def test_the_csv_holds_the_terminal_numbers_unrounded_and_unknown_as_empty(mixed):
    rows = reward_summary(mixed[1])
    header, by_agent = _records(rewards_csv(rows))
    assert header == REWARD_COLUMNS + sorted(["reward_passed", f"reward_{HOSTILE_KEY}"])
    oracle, command, hostile = by_agent["oracle"], by_agent["command"], by_agent[HOSTILE]
    low, high = bootstrap_mean([1.0, 0.5])  # a's and b's rewards; c has none (too few GPUs)
    assert {k: oracle[k] for k in REWARD_COLUMNS} == {
        "sweep_id": SWEEP, "suite": "harbor:/tasks", "agent": "oracle", "trials": "3", "rewarded": "2",
        "mean_reward": "0.75", "mean_reward_ci_low": repr(float(low)), "mean_reward_ci_high": repr(float(high)),
        "agent_wall_time_avg_sec": "40.0", "cost_usd_sum": "0.0", "cost_valid_jobs": "3", "failed_agent": "0",
        "failed_hardware": "1", "infra_errors": "0"}
    assert oracle["reward_passed"] == "2.0" and oracle[f"reward_{HOSTILE_KEY}"] == ""
    # exact: 1/3 written as Python reads it back, not the terminal's 0.333
    assert float(command["mean_reward"]) == 1 / 3 and float(command["mean_reward_ci_low"]) == 1 / 3
    assert (command["cost_usd_sum"], command["cost_valid_jobs"], command["agent_wall_time_avg_sec"]) == ("0.0123", "1", "5400.0")
    assert (command["failed_agent"], command["infra_errors"], command["reward_passed"]) == ("1", "1", "")
    assert hostile[f"reward_{HOSTILE_KEY}"] == "7.0" and hostile["mean_reward"] == "0.25"
    # the terminal shows the same numbers, rounded
    terminal = format_rewards(rows)
    for record in by_agent.values():
        line = next(x for x in terminal.splitlines() if x.startswith(record["agent"]))
        assert f"{float(record['mean_reward']):.3f}" in line and f"{float(record['agent_wall_time_avg_sec']):.2f}" in line


def test_a_sweep_with_no_priced_trial_and_no_reward_writes_empty_cells():
    rows = [{"sweep_id": "x", "suite": "harbor:/t", "agent": "a", "trials": 1, "rewarded": 0, "mean_reward": None,
             "interval": None, "metrics": {"m": None}, "agent_s": None, "cost_usd": None, "cost_known": 0,
             "failed_agent": 1, "failed_hardware": 0, "infra": 0}]
    _, by_agent = _records(rewards_csv(rows))
    assert [by_agent["a"][k] for k in ("mean_reward", "mean_reward_ci_low", "agent_wall_time_avg_sec", "cost_usd_sum",
                                        "reward_m")] == ["", "", "", "", ""]


def test_the_reward_table_goes_beside_the_paper_csv():
    assert rewards_path(Path("out/summary.csv")) == Path("out/summary-rewards.csv")
    assert rewards_path(Path("summary")) == Path("summary-rewards")
    assert rewards_path(Path("/r/run.v2.csv")) == Path("/r/run.v2-rewards.csv")
