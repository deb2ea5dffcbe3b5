"""Stages that were not measured: skipped by the spec, failed by the agent, left for missing assets."""

from __future__ import annotations

import pytest

from reb_ray.grading.categories import AGENT_CATEGORIES, owner_of
from reb_ray.grading.unmeasured import (AGENT_GATES, PROBE_STAGES, STAGE_COLUMNS, agent_failed, assets_missing,
                                        interpreter_fault, skip_reason)
from reb_ray.suite.load import load_suite

DEMO = {t.id: t for t in load_suite("demo")}
REB = {t.id: t for t in load_suite("researchenvbench")}


def _by_stage(verdicts: list) -> dict:
    return {v.stage: v for v in verdicts}


def test_gate_categories_are_the_agents():
    for category in AGENT_GATES:
        assert category in AGENT_CATEGORIES and owner_of(category) == "agent"
    assert owner_of(assets_missing("c1", ["m"], "/cache").failure_category) == "infra"


@pytest.mark.parametrize("category", ["missing_report", "invalid_report", "sandbox_broken_by_agent", "interpreter_missing"])
def test_a_cpu_only_task_keeps_its_denominators_when_the_agent_left_nothing_to_measure(category):
    """Issue 9 items 1-2: C0 counts every baseline import missing, C1 fails, and C2..C4, which the
    spec does not apply to, stay skipped with the spec's reason (never 0/1 in a summary)."""
    task = DEMO["numpy-trainer"]
    got = _by_stage(agent_failed(task, PROBE_STAGES, category, "report file not written"))
    assert list(got) == list(PROBE_STAGES)
    c0 = got["c0"]
    assert (c0.status, c0.failure_category, c0.row["c0_missing"], c0.row["c0_status"]) == (
        "failure", category, task.c0_baseline_total, "failure")
    assert (got["c1"].status, got["c1"].row["c1_failure_category"]) == ("failure", category)
    for stage in ("c2", "c3", "c4"):
        assert got[stage].status == "skipped" and got[stage].reason == "demo suite is CPU-only"
        assert got[stage].failure_category is None and got[stage].row[f"{stage}_status"] == "skipped"
    for stage in ("c5", "env_size"):
        assert (got[stage].status, got[stage].failure_category) == ("not_run", category)
    for verdict in got.values():
        assert set(verdict.row) == set(STAGE_COLUMNS[verdict.stage])


def test_the_paper_denominators_hold_on_every_agent_failure_path():
    """C1 29, C2 44, C3 43, C4 32 applicable tasks, whatever the agent did."""
    counts = {stage: 0 for stage in ("c1", "c2", "c3", "c4")}
    for task in REB.values():
        for stage, verdict in _by_stage(agent_failed(task, PROBE_STAGES, "missing_report", "x")).items():
            if stage in counts and verdict.status == "failure":
                counts[stage] += 1
            assert (verdict.status == "skipped") == (skip_reason(task, stage) is not None)
    assert counts == {"c1": 29, "c2": 44, "c3": 43, "c4": 32}


def test_an_unknown_c0_total_stays_unknown():
    task = DEMO["numpy-trainer"].model_copy(update={"c0_baseline_total": None})
    (c0,) = agent_failed(task, ["c0"], "missing_report", "x")
    assert c0.status == "failure" and c0.row["c0_missing"] is None


FACTS = {"python_path": "/opt/venv/bin/python", "python_exists": True, "python_is_file": True,
         "python_executable": True, "python_runs": True, "python_run_timed_out": False, "python_run_error": None}


@pytest.mark.parametrize("facts, expected", [
    (FACTS, None),
    (None, None),
    ({"error": "OSError"}, None),
    ({**FACTS, "python_exists": False, "python_is_file": False, "python_executable": False, "python_runs": False},
     ("interpreter_missing", "report python_path /opt/venv/bin/python does not exist")),
    ({**FACTS, "python_executable": False, "python_runs": False},
     ("interpreter_broken", "report python_path /opt/venv/bin/python is not executable")),
    ({**FACTS, "python_is_file": False, "python_executable": False, "python_runs": False},
     ("interpreter_broken", "report python_path /opt/venv/bin/python is not a regular file")),
    ({**FACTS, "python_runs": False, "python_run_error": "exit 1: ImportError: libpython3.10.so"},
     ("interpreter_broken", "report python_path /opt/venv/bin/python does not run: exit 1: ImportError: libpython3.10.so")),
    ({**FACTS, "python_runs": False, "python_run_timed_out": True, "python_run_error": "timed out after 60s"}, None),
    ({**FACTS, "python_path": "python3", "python_is_absolute": False, "python_exists": False, "python_runs": False},
     ("interpreter_missing", "report python_path python3 does not exist (not an absolute path, as the report "
                             "contract requires)")),
], ids=["runs", "no-record", "probe-error", "missing", "not-executable", "directory", "crashes", "slow", "relative"])
def test_interpreter_fault(facts, expected):
    assert interpreter_fault(facts) == expected


def test_a_missing_asset_leaves_the_stage_unmeasured_naming_the_asset():
    verdict = assets_missing("c3", ["Qwen3-0.6B"], "/srv/assets")
    assert verdict.status == "not_run" and verdict.failure_category == "infra_assets_missing"
    assert "'Qwen3-0.6B'" in verdict.reason and "/srv/assets" in verdict.reason
    assert verdict.row == {"c3_status": "not_run", "c3_exit_code": None, "c3_failure_category": None}
