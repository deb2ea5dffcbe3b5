"""analysis.cost on the synthetic run (numbers by hand from reb_ray/testing/synthetic.py)."""

from __future__ import annotations

import pytest

from analysis.cost import agent_costs, frontiers, pareto_frontier, token_findings, trial_costs
from analysis.statistics import run_statistics
from reb_ray.results.parquet_sink import rows_to_table
from reb_ray.results.read import read_trials
from reb_ray.results.schema import TRIALS_SCHEMA

from .runs import row
from reb_ray.testing.synthetic import write_fixture


@pytest.fixture(scope="module")
def stats(tmp_path_factory):
    return run_statistics(read_trials(write_fixture(tmp_path_factory.mktemp("fixture") / "run")))


@pytest.fixture(scope="module")
def costs(stats):
    return {c.agent: c for c in agent_costs(stats.run)}


def test_per_agent_cost(costs):
    frugal = costs["frugal"]
    assert (frugal.trials, frugal.tokens_sum, frugal.tokens_known, frugal.tokens_per_trial) == (12, 60_000, 12, 5000)
    assert frugal.cost_usd_sum == pytest.approx(12 * 0.02) and frugal.cost_per_trial == pytest.approx(0.02)
    assert (frugal.agent_time_mean_s, frugal.env_size_mean_bytes) == (100.0, 2**30)
    assert costs["spender"].tokens_per_trial == 100_000 and costs["spender"].agent_time_mean_s == 300.0


def test_cost_per_success(costs):
    frugal = costs["frugal"].per_success
    # C1 applies to t1-t4: 8 trials at $0.02 and 5,000 tokens each, 3 successes
    assert frugal["c1"].successes == 3
    assert frugal["c1"].cost_usd == pytest.approx(8 * 0.02 / 3) and frugal["c1"].tokens == pytest.approx(8 * 5000 / 3)
    assert frugal["c3"].cost_usd == pytest.approx(10 * 0.02 / 3)  # C3: t1-t5, 3 successes
    assert frugal["c4"].cost_usd == pytest.approx(6 * 0.02 / 1)  # C4: t1-t3, 1 success
    assert costs["spender"].per_success["c1"].cost_usd == pytest.approx(8 * 0.40 / 3)


def test_unknown_cost_is_none_never_zero(costs):
    weak = costs["weak"]  # no LLM: no token count, no price
    assert (weak.tokens_sum, weak.tokens_per_trial, weak.cost_usd_sum, weak.cost_per_trial) == (None, None, None, None)
    assert (weak.tokens_known, weak.cost_known) == (0, 0)
    assert all(p.cost_usd is None and p.tokens is None for p in weak.per_success.values())
    # A sum over the trials that know it: one priced trial of two
    table = rows_to_table([row("a", "t1", 1, "scored", c1_status="success", cost_usd=0.5, input_tokens=10, output_tokens=5),
                           row("a", "t2", 1, "scored", c1_status="success", cost_usd=None, input_tokens=10)], TRIALS_SCHEMA)
    (a,) = agent_costs(run_statistics(table).run)
    assert (a.cost_usd_sum, a.cost_known, a.cost_per_trial) == (0.5, 1, 0.5)
    assert (a.tokens_sum, a.tokens_known) == (15, 1)  # t2 lacks output_tokens: no total
    assert a.per_success["c1"].cost_usd == 0.5  # $0.5 over the one priced trial, which succeeded


def test_trial_costs(stats):
    rows = trial_costs(stats.run)
    assert len(rows) == 36
    first = next(r for r in rows if (r["agent"], r["task_id"], r["trial_index"]) == ("spender", "t3", 1))
    assert (first["tokens"], first["cost_usd"], first["agent_wall_time_s"]) == (100_000, 0.40, 300.0)
    assert {r["tokens"] for r in rows if r["agent"] == "weak"} == {None}


def test_pareto_frontier():
    points = {"a": (1.0, 0.5), "b": (2.0, 0.5), "c": (3.0, 0.9), "d": (None, 1.0), "e": (3.0, 0.9), "f": (0.5, 0.1)}
    # b is dominated by a; d has no cost; c and e tie (neither dominates the other)
    assert pareto_frontier(points) == ["f", "a", "c", "e"]
    assert pareto_frontier({}) == []


def test_frontiers_leave_out_unknown_cost(stats, costs):
    by_stage = {f.stage: f for f in frontiers(stats, list(costs.values()))}
    assert by_stage["c1"].agents == ["frugal"] and by_stage["c1"].unknown == ["weak"]  # spender: dearer, no better
    assert [f.agents for f in frontiers(stats, list(costs.values()), "tokens")][0] == ["frugal"]


def test_the_20x_tokens_finding(stats, costs):
    findings = token_findings(stats, list(costs.values()))
    assert [(f.metric, f.agent, f.baseline, f.ratio) for f in findings] == [
        ("tokens", "spender", "frugal", pytest.approx(20.0)), ("cost_usd", "spender", "frugal", pytest.approx(20.0))]
    assert findings[0].worse_or_equal and findings[0].stages["c1"] == (0.375, 0.375)


def _spenders(a_letters: str, tokens_a: int, b_letters: str, tokens_b: int) -> list[dict]:
    rows = []
    for agent, letters, tokens in (("A", a_letters, tokens_a), ("B", b_letters, tokens_b)):
        for i, x in enumerate(letters):
            rows.append(row(agent, f"t{i}", 1, "scored", c1_status="success" if x == "1" else "failure",
                            input_tokens=tokens, output_tokens=0))
    return rows


def test_no_finding_when_the_spender_is_better():
    table = rows_to_table(_spenders("11111111", 100_000, "11000000", 5_000), TRIALS_SCHEMA)
    stats = run_statistics(table)
    assert token_findings(stats, agent_costs(stats.run)) == []  # 20x the tokens, and clearly better at C1
    table = rows_to_table(_spenders("11000000", 100_000, "11000000", 5_000), TRIALS_SCHEMA)
    stats = run_statistics(table)
    assert [(f.agent, f.ratio) for f in token_findings(stats, agent_costs(stats.run))] == [("A", 20.0)]
    table = rows_to_table(_spenders("11000000", 40_000, "11000000", 5_000), TRIALS_SCHEMA)
    stats = run_statistics(table)
    assert token_findings(stats, agent_costs(stats.run)) == []  # 8x: below the ratio


def test_a_stage_that_applies_to_no_trial_leaves_nobody_out_as_unknown():
    """The real demo sweep's report listed every agent as "left out, unknown $/trial" because
    C3/C4 apply to no demo task; only an agent whose spend is unknown is left out."""
    rows = []
    for agent, tokens in (("A", 1_000), ("B", 9_000), ("C", None)):
        for i in range(3):
            rows.append(row(agent, f"t{i}", 1, "scored", c1_status="success", c3_status="skipped",
                            input_tokens=tokens, output_tokens=None if tokens is None else 0))
    stats = run_statistics(rows_to_table(rows, TRIALS_SCHEMA))
    by_stage = {f.stage: f for f in frontiers(stats, agent_costs(stats.run), "tokens")}
    assert by_stage["c1"].agents == ["A"] and by_stage["c1"].unknown == ["C"]
    assert by_stage["c3"].agents == [] and by_stage["c3"].unknown == []
