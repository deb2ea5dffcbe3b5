"""analysis.statistics on real Parquet runs; every expected number is derived by hand from the
outcome letters in reb_ray/testing/synthetic.py (or the rows built here)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.estimators import Z95
from analysis.scores import summarize
from analysis.statistics import all_comparisons, compare, run_statistics
from reb_ray.suite.load import load_suite
from reb_ray.results.parquet_sink import rows_to_table
from reb_ray.results.read import read_trials
from reb_ray.results.schema import TRIALS_SCHEMA

from .runs import row
from reb_ray.testing.synthetic import fixture_rows, trial, write, write_fixture

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def stats(tmp_path_factory):
    return run_statistics(read_trials(write_fixture(tmp_path_factory.mktemp("fixture") / "run")))


def test_stage_rates_over_applicable_trials(stats):
    c1 = stats.stage("syn", "frugal", "c1")
    # C1 applies to t1-t4; frugal: S S F F (trial 0), S F F F (trial 1)
    assert (c1.tasks, c1.trials, c1.successes, c1.failures, c1.rate) == (4, 8, 3, 5, 0.375)
    assert c1.interval.method == "task_bootstrap"  # two trials per task
    assert c1.interval.low <= c1.rate <= c1.interval.high
    # pass@1 = mean of c/n per task = (1 + 1/2 + 0 + 0) / 4; pass@2: t1 and t2 have a success;
    # pass^2: only t1 succeeded twice.
    assert c1.pass_at_k == {1: 0.375, 2: 0.5} and c1.pass_hat_k == {1: 0.375, 2: 0.25}
    c4 = stats.stage("syn", "frugal", "c4")
    # C4 applies to t1-t3: t1 S then F, t2 lacked GPUs twice, t3 F twice. Hardware counts in
    # the denominator (the paper's rate) but apart from the agent's failures.
    assert (c4.trials, c4.successes, c4.failures, c4.hardware) == (6, 1, 3, 2)
    c3 = stats.stage("syn", "weak", "c3")
    assert (c3.trials, c3.not_run, c3.failures) == (10, 1, 9)  # t4/0's asset was missing: still applicable


def test_all_or_nothing_uses_wilson_over_tasks(stats):
    c1 = stats.stage("syn", "weak", "c1")  # 0 of 8 trials over 4 tasks
    assert (c1.rate, c1.interval.method) == (0.0, "wilson_tasks")
    assert (c1.interval.low, c1.interval.high) == pytest.approx((0.0, Z95**2 / (4 + Z95**2)))  # Wilson 0/4


def test_one_trial_per_task_is_wilson(tmp_path):
    run = write(tmp_path / "run", [a for a in fixture_rows() if a[0]["trial_index"] == 0 and a[0]["status"] == "scored"])
    c1 = run_statistics(read_trials(run)).stage("syn", "frugal", "c1")
    assert (c1.successes, c1.trials, c1.interval.method) == (2, 4, "wilson")  # S S F F
    assert (c1.interval.low, c1.interval.high) == pytest.approx((0.15, 0.85), abs=5e-5)  # Wilson 2/4
    assert c1.pass_at_k == {1: 0.5} and c1.pass_hat_k == {1: 0.5}


def test_c5_success_is_an_audited_honest_report(stats):
    frugal = stats.stage("syn", "frugal", "c5")
    assert (frugal.trials, frugal.successes, frugal.failures) == (12, 10, 2)  # two lies
    weak = stats.stage("syn", "weak", "c5")
    # t1 lied twice (python_path); t5/0 was not audited, t6/1 had no report: never ran
    assert (weak.trials, weak.successes, weak.failures, weak.not_run) == (12, 8, 2, 2)


def test_c0_missing_fraction(stats):
    frugal, weak = (c for c in stats.c0 if c.agent in ("frugal", "weak"))
    # totals 10..60 per task, twice: 420; frugal misses (0+2+0+4+5+0) + (0+2+3+0+5+6) = 27
    assert (frugal.missing, frugal.total, frugal.unknown) == (27, 420, 0)
    assert frugal.fraction == pytest.approx(27 / 420)
    assert frugal.interval.method == "task_bootstrap" and frugal.interval.low < 27 / 420 < frugal.interval.high
    # weak misses half of each total (105 per trial), except t6/1 without a report: all 60
    assert (weak.missing, weak.total) == (105 + 105 - 30 + 60, 420)


def test_rates_agree_with_the_csv_numbers(stats, tmp_path):
    """Item 8: the statistics' success/trials are the CSV's cN_success / cN_denom."""
    rows = {r["agent"]: r for r in summarize(read_trials(write_fixture(tmp_path / "run")))}
    for agent, csv in rows.items():
        for stage, name in (("c1", "c1_cpu"), ("c2", "c2_cuda"), ("c3", "c3_single_gpu"), ("c4", "c4_multi_gpu")):
            s = stats.stage("syn", agent, stage)
            assert (s.successes, s.trials) == (csv[f"{name}_success"], csv[f"{name}_denom"]), (agent, stage)
        c0 = next(c for c in stats.c0 if c.agent == agent)
        assert (c0.missing, c0.total) == (csv["c0_missing_sum"], csv["c0_total_sum"])


def test_denominator_comes_from_the_task_not_the_trial():
    """A trial that recorded no C3 status on a task whose other trials say C3 applies still
    counts in the denominator (as unknown, not a success)."""
    table = rows_to_table([
        row("a", "t1", 1, "scored", c3_status="success"),
        row("b", "t1", 1, "scored", c3_status=None),
        row("a", "t2", 1, "scored", c3_status="skipped"),
        row("b", "t2", 1, "scored", c3_status="skipped"),
    ], TRIALS_SCHEMA)
    stats = run_statistics(table)
    b = stats.stage("s1", "b", "c3")
    assert (b.tasks, b.trials, b.successes, b.unknown, b.rate) == (1, 1, 0, 1, 0.0)
    assert stats.stage("s1", "a", "c3").trials == 1  # t2 does not apply C3


def test_task_specs_decide_applicability():
    # demo/torch-tiny applies C2 (the other demo tasks do not); no trial recorded a C2 status.
    table = rows_to_table([row("a", "torch-tiny", 1, "scored"), row("a", "numpy-trainer", 1, "scored")], TRIALS_SCHEMA)
    assert run_statistics(table).stage("s1", "a", "c2").trials == 0  # unknown everywhere: counts nowhere
    c2 = run_statistics(table, tasks=load_suite("demo")).stage("s1", "a", "c2")
    assert (c2.tasks, c2.trials, c2.unknown) == (1, 1, 1)


def _paired(a_wins: str, b_wins: str) -> list[dict]:
    rows = []
    for i, (x, y) in enumerate(zip(a_wins, b_wins)):
        rows.append(row("A", f"t{i}", 1, "scored", c1_status="success" if x == "1" else "failure"))
        rows.append(row("B", f"t{i}", 1, "scored", c1_status="success" if y == "1" else "failure"))
    return rows


def test_paired_comparison():
    run = run_statistics(rows_to_table(_paired("11111111", "11000000"), TRIALS_SCHEMA)).run
    cmp = compare(run, "s1", "c1", "A", "B")
    # A solved all 8 tasks, B two of them: 6 discordant, all A's; p = 2 / 2^6
    assert (cmp.tasks, cmp.rate_a, cmp.rate_b, cmp.difference) == (8, 1.0, 0.25, 0.75)
    assert (cmp.a_only, cmp.b_only, cmp.p_value) == (6, 0, pytest.approx(2 / 64))
    assert cmp.note is None and 0 < cmp.interval.low <= 0.75 <= cmp.interval.high <= 1.0


def test_too_few_tasks_is_said():
    run = run_statistics(rows_to_table(_paired("1111", "0000"), TRIALS_SCHEMA)).run
    cmp = compare(run, "s1", "c1", "A", "B")
    assert cmp.p_value == pytest.approx(2 / 16) and "too few tasks" in cmp.note and "4 shared" in cmp.note
    run = run_statistics(rows_to_table(_paired("11100000", "00000000"), TRIALS_SCHEMA)).run
    cmp = compare(run, "s1", "c1", "A", "B")
    assert (cmp.a_only, cmp.p_value) == (3, pytest.approx(2 / 8))
    assert "they differ on 3 of 8" in cmp.note


def test_several_trials_per_task_compare_task_majorities(stats):
    cmp = compare(stats.run, "syn", "c1", "frugal", "weak")
    # per-task success fractions: frugal t1 1, t2 1/2, t3 0, t4 0; weak 0 everywhere.
    # Solved = more than half the trials: only t1 (t2's 1 of 2 is not more than half).
    assert (cmp.tasks, cmp.difference, cmp.a_only, cmp.b_only) == (4, 0.375, 1, 0)
    assert cmp.p_value == 1.0 and "too few tasks" in cmp.note
    same = compare(stats.run, "syn", "c3", "frugal", "spender")
    assert (same.difference, same.interval.low, same.interval.high, same.p_value) == (0.0, 0.0, 0.0, 1.0)
    pairs = {(c.agent_a, c.agent_b) for c in all_comparisons(stats.run)}
    assert pairs == {("frugal", "spender"), ("frugal", "weak"), ("spender", "weak")}
    with pytest.raises(KeyError, match="'nobody'"):
        compare(stats.run, "syn", "c1", "frugal", "nobody")


def test_intervals_are_the_same_in_another_process(stats, tmp_path):
    """Seeded resampling: the same numbers in a fresh interpreter with another hash seed."""
    here = stats.stage("syn", "frugal", "c2").interval
    code = ("import sys; from pathlib import Path; from analysis.statistics import run_statistics;"
            "from reb_ray.results.read import read_trials; from reb_ray.testing.synthetic import write_fixture;"
            "i = run_statistics(read_trials(write_fixture(Path(sys.argv[1])))).stage('syn', 'frugal', 'c2').interval;"
            "print(repr((i.low, i.high)))")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "run")], capture_output=True, text=True,
                         cwd=ROOT, env={**os.environ, "PYTHONHASHSEED": "12345"}, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == repr((here.low, here.high))
