"""A command stage that succeeded while tracked files changed during the probe phase fails as
the agent's (`charge_probe_changes`), through the one grader the probe phase and regrade call."""

from __future__ import annotations

from reb_ray.grading.probe_changes import charge_probe_changes
from reb_ray.grading.stage import CommandRecord, GradeContext, grade_stage
from reb_ray.suite.load import load_suite


def _task():
    return next(t for t in load_suite("demo") if t.id == "numpy-trainer")


def _c1(context: GradeContext, exit_code: int = 0, output: str = "final loss 0.1\n"):
    return grade_stage("c1", CommandRecord(exit_code, False, output, None), _task(), context)


def test_a_success_that_ran_with_a_changed_file_fails_as_the_agents():
    verdict = _c1(GradeContext(repo_probe_changed=["train.py"]))
    assert (verdict.status, verdict.failure_category) == ("failure", "repo_changed_in_probes")
    assert verdict.failure_category.owner == "agent" and "train.py" in verdict.reason
    assert verdict.row["c1_status"] == "failure" and verdict.row["c1_failure_category"] == "repo_changed_in_probes"


def test_nothing_changed_or_unknown_leaves_the_success():
    for changed in (None, []):
        assert _c1(GradeContext(repo_probe_changed=changed)).status == "success"


def test_a_failure_keeps_its_own_category_and_other_stages_are_untouched():
    failed = _c1(GradeContext(repo_probe_changed=["train.py"]), exit_code=1,
                 output="ModuleNotFoundError: No module named 'numpy'\n")
    assert (failed.status, failed.failure_category) == ("failure", "deps")
    c0 = grade_stage("c0", {"missing": [], "total": 1}, _task())
    assert charge_probe_changes(c0, ["train.py"]) is c0


def test_many_files_are_named_up_to_five():
    files = [f"f{i}.py" for i in range(8)]
    reason = _c1(GradeContext(repo_probe_changed=files)).reason
    assert "f4.py" in reason and "f5.py" not in reason and "3 more" in reason
