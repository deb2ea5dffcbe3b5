"""Re-grading stored rows under today's rules (pure: rows as the datasets hold them, no containers).

The rows below are shaped as trials recorded them BEFORE issue 9 (every stage not_run for a
missing report; C4 run and exit 127 for an interpreter that does not exist): re-grading them must
give what a trial records today. tests/test_sweep.py checks on real sweeps that a fresh run
re-grades to itself.
"""

from __future__ import annotations

import json

from reb_ray.models.task import load_suite
from reb_ray.regrade import regrade_trial

STAGE_KEYS = ("sweep_id", "trial_id", "attempt", "task_id", "agent", "stage", "status", "reason", "exit_code", "timed_out",
              "failure_category", "duration_s", "command", "log_head", "log_tail", "raw", "started_at")
GHOST = "/opt/venvs/gone/bin/python"
REPORT = {"python_path": GHOST, "python_version": "3.10.14", "torch_version": "2.5.1", "cuda_available": True,
          "gpu_count": 2, "ddp_expected_ok": True, "env_tool": "venv", "env_name": "gone", "notes": None}
MISSING_FACTS = {"python_path": GHOST, "python_is_absolute": True, "python_exists": False, "python_is_file": False,
                 "python_executable": False, "python_runs": False, "python_run_timed_out": False,
                 "python_run_error": f"not run: {GHOST} does not exist", "python_version": None,
                 "torch_import_ok": False, "torch_version": None}


def _task(suite: str, task_id: str):
    return next(t for t in load_suite(suite) if t.id == task_id)


def _trial(task, **row) -> dict:
    return {"sweep_id": "old", "trial_id": f"a/{task.id}/0", "attempt": 1, "task_id": task.id, "agent": "a",
            "suite": task.suite, "status": "scored", "c0_total": task.c0_baseline_total, **row}


def _stage(task, stage: str, status: str, **fields) -> dict:
    row = {key: None for key in STAGE_KEYS}
    row.update(sweep_id="old", trial_id=f"a/{task.id}/0", attempt=1, task_id=task.id, agent="a", stage=stage,
               status=status, **fields)
    return row


def test_an_old_missing_report_row_regrades_to_agent_failures_with_spec_denominators():
    task = _task("demo", "numpy-trainer")
    stages = {"agent": _stage(task, "agent", "success", exit_code=0),
              "report": _stage(task, "report", "failure", reason="report file not written", failure_category="missing_report")}
    for name in ("c0", "c1", "c2", "c3", "c4", "c5", "env_size"):  # before issue 9: all not_run, even C2..C4
        stages[name] = _stage(task, name, "not_run", reason="missing_report")
    trial = _trial(task, report_status="missing_report", failure_owner="agent", failure_category="missing_report",
                   c0_status="not_run", c0_missing=None, c1_status="not_run", c2_status="not_run", c3_status="not_run",
                   c4_status="not_run")
    out = regrade_trial(trial, stages, task, "old-regrade")
    row, by_stage = out.trial, {s["stage"]: s for s in out.stages}
    assert (row["c0_status"], row["c0_missing"], row["c0_total"]) == ("failure", 1, 1)
    assert (row["c1_status"], row["c1_failure_category"]) == ("failure", "missing_report")
    assert (row["c2_status"], row["c3_status"], row["c4_status"]) == ("skipped", "skipped", "skipped")
    assert by_stage["c3"]["reason"] == "demo suite is CPU-only"
    assert (row["status"], row["failure_owner"], row["failure_category"]) == ("scored", "agent", "missing_report")
    assert row["failure_reason"] == "missing_report: c1: no usable report: report file not written"
    assert row["stages_missing_assets"] == 0
    assert sorted(by_stage) == sorted(stages) and all(s["sweep_id"] == "old-regrade" for s in out.stages)


def test_an_old_missing_interpreter_row_is_judged_once():
    """Issue 9 item 13: C4 ran, exited 127, and the DDP claim became a second lie; C3 likewise."""
    task = _task("researchenvbench", "geeeekexplorer--nano-vllm")
    observed = {"c2_status": "not_run", "c2_device_count": None, "c2_cuda_available": None, "c4_status": "failure",
                "gpus_assigned": 2}
    stages = {
        "agent": _stage(task, "agent", "success", exit_code=0),
        "report": _stage(task, "report", "success", raw=json.dumps(REPORT)),
        "c0": _stage(task, "c0", "not_run", reason=f"interpreter {GHOST} does not run: not found"),
        "c1": _stage(task, "c1", "skipped", reason="repo_not_supported (CUDA/NCCL only)"),
        "c2": _stage(task, "c2", "not_run", reason="interpreter does not run"),
        "c3": _stage(task, "c3", "failure", exit_code=127, timed_out=False, failure_category="entrypoint_not_found",
                     log_head="sh: 1: python: not found\n"),
        "c4": _stage(task, "c4", "failure", exit_code=127, timed_out=False, failure_category="entrypoint_not_found",
                     raw=json.dumps({"exit_code": 127, "timed_out": False, "port": 29512}), log_head="not found\n"),
        "c5": _stage(task, "c5", "success", raw=json.dumps({"facts": MISSING_FACTS, "observed": observed, "items": []})),
        "env_size": _stage(task, "env_size", "not_run", reason="exit 127"),
    }
    trial = _trial(task, report_status="ok", gpus_assigned=2, c3_status="failure", c3_exit_code=127, c4_status="failure",
                   c4_exit_code=127, c4_port=29512, c5_path=1, c5_capability=1)
    out = regrade_trial(trial, stages, task, "old-regrade")
    row, by_stage = out.trial, {s["stage"]: s for s in out.stages}
    for stage in ("c0", "c2", "c3", "c4"):
        assert (by_stage[stage]["status"], by_stage[stage]["failure_category"]) == ("failure", "interpreter_missing"), stage
    assert by_stage["c1"]["status"] == "skipped"
    assert (row["c0_missing"], row["c4_exit_code"], row["c4_port"], row["c3_exit_code"]) == (22, None, None, None)
    assert (row["c5_path"], row["c5_version"], row["c5_capability"]) == (1, 0, 0)
    items = {i["check"]: i["verdict"] for i in json.loads(by_stage["c5"]["raw"])["items"]}
    assert (items["cuda_available"], items["ddp_expected_ok"], items["python_path_exists"]) == (
        "inconclusive", "inconclusive", "hallucination")
    assert (by_stage["env_size"]["status"], by_stage["env_size"]["failure_category"]) == ("not_run", "interpreter_missing")
    assert row["failure_reason"] == f"interpreter_missing: c4: report python_path {GHOST} does not exist"
