"""analysis.failures on the synthetic run (numbers by hand from reb_ray/testing/synthetic.py)."""

from __future__ import annotations

from collections import Counter

import pytest

from analysis.failures import failure_counts, honesty, unscored_attempts
from analysis.statistics import run_statistics
from reb_ray.results.read import read_stages, read_trials

from reb_ray.testing.synthetic import trial, write, write_fixture


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return write_fixture(tmp_path_factory.mktemp("fixture") / "run")


@pytest.fixture(scope="module")
def run(run_dir):
    return run_statistics(read_trials(run_dir)).run


def _counts(rows, agent) -> dict:
    return {(f.stage, f.owner, f.category): f.trials for f in rows if f.agent == agent}


def test_failures_by_stage_owner_and_category(run, run_dir):
    rows = failure_counts(run, read_stages(run_dir))
    weak = _counts(rows, "weak")
    assert weak[("c1", "agent", "deps")] == 2 and weak[("c1", "agent", "runtime")] == 6  # t2 D twice
    assert weak[("c3", "infra", "infra_assets_missing")] == 1  # t4/0 not run: not the agent's
    assert weak[("c4", "hardware", "insufficient_hardware")] == 2
    # t6/1 had no report: C0's category is on its stage row; C2 fails for it too
    assert weak[("c0", "agent", "missing_report")] == 1 and weak[("c0", "agent", "missing_imports")] == 11
    assert weak[("c2", "agent", "missing_report")] == 1
    assert weak[("c5", "agent", "over_claim")] == 2 and weak[("c5", "agent", "missing_report")] == 1
    assert weak[("c5", "unknown", "not_audited")] == 1  # t5/0: no facts record
    frugal = _counts(rows, "frugal")
    assert frugal[("c4", "agent", "runtime")] == 3 and frugal[("c4", "hardware", "insufficient_hardware")] == 2
    # skipped stages are no failures: C1 does not apply to t5, t6
    assert sum(n for (stage, _, _), n in frugal.items() if stage == "c1") == 5
    # without the stages table, C0's category is unknown: the agent's missing imports
    plain = _counts(failure_counts(run), "weak")
    assert plain[("c0", "agent", "missing_imports")] == 12


def test_unscored_attempts_are_counted_apart(run):
    assert unscored_attempts(run) == {("syn", "weak"): Counter({("infra_error", "infra_sandbox"): 1})}


def test_honesty_names_the_claims(run, run_dir):
    by_agent = {h.agent: h for h in honesty(run, read_stages(run_dir))}
    frugal = by_agent["frugal"]
    assert (frugal.audited, frugal.not_run, frugal.honest, frugal.over_claimed_trials) == (12, 0, 10, 2)
    assert frugal.over_claims == {"path": 0, "version": 1, "capability": 1}
    assert frugal.checks == {"torch_version": 1, "gpu_count": 1} and frugal.under_checks == {"cuda_available": 1}
    assert frugal.under_claims == 1
    weak = by_agent["weak"]
    # C5 never ran on t5/0 (no facts) and t6/1 (no report): apart from honest and dishonest
    assert (weak.trials, weak.audited, weak.not_run, weak.honest) == (12, 10, 2, 8)
    assert weak.checks == {"python_path": 2} and weak.items_unread == 0
    # without the stages table: the kind sums from the trials rows, no checks
    plain = {h.agent: h for h in honesty(run)}["frugal"]
    assert plain.over_claims == frugal.over_claims and plain.checks == {} and plain.items_unread == 0


def test_unreadable_audit_items_are_counted(tmp_path):
    row, stages = trial("a", "t1", 0, "SSSS", lies=("gpu_count",))
    for stage in stages:
        if stage["stage"] == "c5":
            stage["raw"] = "{not json"
    run_dir = write(tmp_path / "run", [(row, stages)])
    (h,) = honesty(run_statistics(read_trials(run_dir)).run, read_stages(run_dir))
    assert (h.over_claims["capability"], h.checks, h.items_unread) == (1, {}, 1)


def test_an_older_c5_failure_row_counts_as_audited(tmp_path):
    from .runs import write_run

    # runs.ROWS: alpha t1 (C5 status failure, one version and one capability lie), t2 (C5 not
    # run), t3 (audited, a path lie)
    (h, *_) = honesty(run_statistics(read_trials(write_run(tmp_path / "run"))).run)
    assert (h.agent, h.audited, h.not_run, h.honest, h.over_claimed_trials) == ("alpha", 2, 1, 0, 2)
    assert h.over_claims == {"path": 1, "version": 1, "capability": 1} and h.under_claims == 2
