"""Grading C4 (multi GPU): a pure function of the task's stage and the probe's raw record.

The raw record is what reb_ray.probing.multi_gpu.run_multi_gpu returned (possibly read back
from storage, so missing keys are tolerated). Rules:

- no record: `not_run` (the probe never ran; the reason says so), as for a stage that is not
  applicable (its skip reason);
- `status_hint == "insufficient_hardware"`: `failure` with category `insufficient_hardware`
  (as in the paper: a non-success, labelled as the hardware's, never the agent's);
- otherwise the command-stage rule (exit code and optional log pattern, failure categories);
  a run killed at its deadline is category `timeout` (a hung rendezvous is a timeout, not a
  generic failure).
"""

from __future__ import annotations

from reb_ray.grading.command_stage import grade_command_stage
from reb_ray.models.task import MultiGpuStageSpec

INSUFFICIENT_HARDWARE = "insufficient_hardware"


def grade_multi_gpu(stage: MultiGpuStageSpec, raw: dict | None) -> dict:
    """{status: success|failure|not_run, failure_category, reason} for one C4 run.

    Never raises for a malformed or partial record: unknown values grade as a failure.
    """
    if not stage.applicable:
        return {"status": "not_run", "failure_category": None, "reason": stage.skip_reason}
    if raw is None:
        return {"status": "not_run", "failure_category": None, "reason": "the C4 probe left no record"}
    if raw.get("status_hint") == INSUFFICIENT_HARDWARE:
        gpus = raw.get("gpus") or []
        ranks = raw.get("ranks") or stage.ranks
        return {
            "status": "failure",
            "failure_category": INSUFFICIENT_HARDWARE,
            "reason": f"{ranks} ranks need {ranks} GPUs; {len(gpus)} assigned",
        }
    timed_out = bool(raw.get("timed_out"))
    result = grade_command_stage(stage, raw.get("exit_code"), timed_out, raw.get("output") or "",
                                 raw.get("log_pattern_matched"))
    if timed_out:
        result["failure_category"] = "timeout"
    if result["status"] == "failure" and raw.get("leftovers_remaining"):
        result["reason"] += f"; {len(raw['leftovers_remaining'])} rank process(es) could not be killed"
    return result
