"""Grading a command stage (C1 now; C3 and C4 share it): a pure function of its raw result."""

from __future__ import annotations

from reb_ray.grading.categories import classify_failure
from reb_ray.models.task import StageSpec


def grade_command_stage(stage: StageSpec, exit_code: int | None, timed_out: bool, log: str,
                        pattern_matched: bool | None = None) -> dict:
    """{status, failure_category, reason} for one run of `stage`'s command.

    Success needs the rule's exit code and, when set, its log pattern in the output:
    `pattern_matched` is the verdict of the search over the whole output while it streamed
    (it decides when given); without it the pattern is searched in `log` (the kept output).
    """
    if not timed_out and stage.success.matches(exit_code, log, pattern_matched):
        return {"status": "success", "failure_category": None, "reason": None}
    category = classify_failure(exit_code, timed_out, log)
    if timed_out:
        reason = f"timed out after {stage.timeout_s:g} s"
    elif exit_code == stage.success.exit_code:
        reason = f"log pattern {stage.success.log_pattern!r} not found"
    else:
        reason = f"exit code {exit_code}"
    return {"status": "failure", "failure_category": category, "reason": reason}
