"""C4 grading is pure: (stage spec, raw record of run_multi_gpu) -> stage result."""

from __future__ import annotations

from reb_ray.grading.multi_gpu import grade_multi_gpu
from reb_ray.models.task import MultiGpuStageSpec

STAGE = MultiGpuStageSpec(command="python ddp.py", timeout_s=20, launcher="torchrun", ranks=2,
                          success={"exit_code": 0, "log_pattern": "world_size=2 ok"})


def raw(**fields) -> dict:
    base = {"status_hint": None, "port": 29555, "ranks": 2, "launcher": "torchrun", "command": "x",
            "gpus": ["0", "1"], "exit_code": 0, "timed_out": False, "duration_s": 3.0,
            "output": "world_size=2 ok\n", "leftover_pids": [], "leftovers_remaining": []}
    base.update(fields)
    return base


def test_success_needs_exit_code_and_log_pattern():
    assert grade_multi_gpu(STAGE, raw()) == {"status": "success", "failure_category": None, "reason": None}
    result = grade_multi_gpu(STAGE, raw(output="done\n"))
    assert result["status"] == "failure" and "log pattern" in result["reason"]


def test_insufficient_hardware_is_a_labelled_failure():
    result = grade_multi_gpu(STAGE, raw(status_hint="insufficient_hardware", gpus=["0"], exit_code=None, output=""))
    assert result == {"status": "failure", "failure_category": "insufficient_hardware",
                      "reason": "2 ranks need 2 GPUs; 1 assigned"}


def test_f10_timeout_is_category_timeout_not_a_generic_failure():
    result = grade_multi_gpu(STAGE, raw(exit_code=124, timed_out=True, output="rank 1 never joins\n"))
    assert result["status"] == "failure"
    assert result["failure_category"] == "timeout"
    assert result["reason"] == "timed out after 20 s"
    # even when the exit code is lost (the exec had to be killed from outside)
    assert grade_multi_gpu(STAGE, raw(exit_code=None, timed_out=True, output="ModuleNotFoundError"))["failure_category"] == "timeout"


def test_runtime_failures_reuse_the_command_stage_categories():
    result = grade_multi_gpu(STAGE, raw(exit_code=1, output="ModuleNotFoundError: No module named 'deepspeed'\n"))
    assert result == {"status": "failure", "failure_category": "deps", "reason": "exit code 1"}
    result = grade_multi_gpu(STAGE, raw(exit_code=1, output="ChildFailedError\n", leftovers_remaining=[41, 42]))
    assert result["failure_category"] == "runtime"
    assert result["reason"] == "exit code 1; 2 rank process(es) could not be killed"


def test_missing_record_and_inapplicable_stage_are_not_run():
    assert grade_multi_gpu(STAGE, None) == {"status": "not_run", "failure_category": None,
                                            "reason": "the C4 probe left no record"}
    skipped = MultiGpuStageSpec(applicable=False, skip_reason="no distributed entrypoint")
    assert grade_multi_gpu(skipped, raw()) == {"status": "not_run", "failure_category": None,
                                               "reason": "no distributed entrypoint"}


def test_partial_stored_record_is_graded_without_raising():
    assert grade_multi_gpu(STAGE, {})["status"] == "failure"
    assert grade_multi_gpu(STAGE, {"exit_code": 0, "output": "world_size=2 ok"})["status"] == "success"
