"""Grading a command stage: the success rule judges the whole output, not the kept head and tail."""

from __future__ import annotations

from reb_ray.grading.command_stage import grade_command_stage
from reb_ray.grading.multi_gpu import grade_multi_gpu
from reb_ray.models.task import MultiGpuStageSpec, StageSpec

STAGE = StageSpec(command="python train.py", success={"exit_code": 0, "log_pattern": "Starting training on cpu"})
KEPT = "x" * 100 + "\n[... 123456 bytes dropped by reb-ray ...]\n" + "y" * 100  # the pattern lay in the dropped part


def test_the_streamed_verdict_decides_where_the_kept_log_lost_the_line():
    assert grade_command_stage(STAGE, 0, False, KEPT, pattern_matched=True)["status"] == "success"
    failed = grade_command_stage(STAGE, 0, False, KEPT, pattern_matched=False)
    assert failed["status"] == "failure" and failed["reason"] == "log pattern 'Starting training on cpu' not found"
    assert grade_command_stage(STAGE, 0, False, KEPT)["status"] == "failure"  # no verdict: the kept log is searched
    assert grade_command_stage(STAGE, 3, False, KEPT, pattern_matched=True)["reason"] == "exit code 3"


def test_c4_uses_the_streamed_verdict_of_its_raw_record():
    stage = MultiGpuStageSpec(command="python ddp.py", success={"log_pattern": "rank 1 done"})
    raw = {"exit_code": 0, "timed_out": False, "output": KEPT, "log_pattern_matched": True}
    assert grade_multi_gpu(stage, raw)["status"] == "success"
    assert grade_multi_gpu(stage, dict(raw, log_pattern_matched=None))["status"] == "failure"
