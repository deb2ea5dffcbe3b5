"""settle_rows: the trial-level verdict of an attempt's stage rows (pure)."""

from __future__ import annotations

from reb_ray.trial.record import settle_rows
from reb_ray.trial.result import StageRow


def _stage(stage: str, status: str, category: str | None = None, reason: str | None = None) -> StageRow:
    return StageRow(stage=stage, status=status, failure_category=category, reason=reason)


AGENT_TIMED_OUT = _stage("agent", "failure", "timeout", "agent_timeout_s=600")


def test_failure_reason_names_the_highest_failed_stage_and_the_agent_limit():
    """Issue 9 item 19: C0 failed (deps), C1 passed, C2 failed: the reason is C2's, not `deps: c0`."""
    stages = [AGENT_TIMED_OUT, _stage("report", "success"), _stage("c0", "failure", "deps", "1 missing: yaml"),
              _stage("c1", "success"), _stage("c2", "failure", "cpu_only_build", "torch 2.13.0+cpu has no CUDA"),
              _stage("c3", "skipped"), _stage("c5", "success"), _stage("env_size", "success")]
    got = settle_rows(stages)
    assert (got["status"], got["failure_owner"], got["failure_category"]) == ("scored", "agent", "cpu_only_build")
    assert got["failure_reason"] == ("cpu_only_build: c2: torch 2.13.0+cpu has no CUDA "
                                     "[agent limit agent_timeout_s=600 fired]")
    assert got["stages_missing_assets"] == 0


def test_c4_ranks_above_c1_and_c0():
    stages = [_stage("agent", "success"), _stage("c0", "failure", "deps", "a"), _stage("c1", "failure", "runtime", "b"),
              _stage("c4", "failure", "runtime", "exit code 1"), _stage("c3", "failure", "oom", "c")]
    got = settle_rows(stages)
    assert got["failure_reason"] == "runtime: c4: exit code 1" and got["failure_owner"] == "agent"


def test_hardware_only_failures_keep_owner_hardware():
    stages = [_stage("agent", "success"), _stage("c0", "success"), _stage("c1", "success"),
              _stage("c3", "failure", "insufficient_hardware", "needs 1 GPU(s), 0 assigned"),
              _stage("c4", "failure", "insufficient_hardware", "needs 2 GPU(s), 0 assigned")]
    got = settle_rows(stages)
    assert (got["status"], got["failure_owner"]) == ("scored", "hardware")
    assert got["failure_reason"].startswith("insufficient_hardware: c4:")


def test_an_agent_failure_is_the_owner_even_beside_a_higher_hardware_failure():
    stages = [_stage("c1", "failure", "deps", "No module named numpy"),
              _stage("c4", "failure", "insufficient_hardware", "needs 2")]
    got = settle_rows(stages)
    assert got["failure_owner"] == "agent" and got["failure_reason"] == "deps: c1: No module named numpy"


def test_a_stage_left_unmeasured_for_an_asset_is_counted_not_retried():
    """Under --skip-missing-assets: scored on the rest, never infra_error, never the agent's failure."""
    stages = [_stage("agent", "success"), _stage("c0", "success"),
              _stage("c1", "not_run", "infra_assets_missing", "missing asset 'm' in /cache"),
              _stage("c3", "not_run", "infra_assets_missing", "missing asset 'm' in /cache"), _stage("c5", "success")]
    got = settle_rows(stages)
    assert got == {"status": "scored", "failure_owner": None, "failure_category": None, "failure_reason": None,
                   "stages_missing_assets": 2}


def test_other_infra_categories_still_make_an_infra_error():
    stages = [_stage("c0", "not_run", "infra_toolbox", "no record"), _stage("c1", "failure", "deps", "x"),
              _stage("c3", "not_run", "infra_assets_missing", "missing asset")]
    got = settle_rows(stages)
    assert (got["status"], got["failure_owner"], got["failure_category"]) == ("infra_error", "infra", "infra_toolbox")
    assert "agent limit" not in got["failure_reason"] and got["stages_missing_assets"] == 1


def test_not_run_keeps_the_spec_skips():
    """Issue 9 item 2: a path that probes nothing still records C2..C4 of a CPU-only task as skipped."""
    from reb_ray.models.sweep import SweepConfig, TrialSpec
    from reb_ray.suite.load import load_suite
    from reb_ray.trial.record import TrialRecorder

    task = next(t for t in load_suite("demo") if t.id == "numpy-trainer")
    rec = TrialRecorder(TrialSpec(sweep_id="s", agent="noop", task=task, trial_index=0, config=SweepConfig()))
    rec.not_run(["c0", "c1", "c2", "c3", "c4"], "toolbox missing", "infra_toolbox")
    assert {s.stage: s.status for s in rec.stages} == {"c0": "not_run", "c1": "not_run", "c2": "skipped",
                                                       "c3": "skipped", "c4": "skipped"}
    assert rec.row["c3_status"] == "skipped" and rec.stages[3].reason == "demo suite is CPU-only"
    assert rec.stages[3].failure_category is None
