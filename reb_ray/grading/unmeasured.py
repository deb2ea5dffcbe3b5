"""Stages that were not measured, and whose that is: pure rules shared by trials and re-grading.

A probe stage that was not measured is one of three things, each with its owner:

- `skipped`: the task spec says it does not apply (`applicable = false` and its skip_reason).
  Applicability comes from the spec alone, on every path: also when nothing was probed because
  the report is missing or the agent broke the sandbox, so the denominators (the paper's C1 29,
  C2 44, C3 43, C4 32) never change from agent to agent.
- a `failure` of the agent: the agent is why nothing could be measured (no report, an invalid
  report, a sandbox the agent broke, a report interpreter that is missing or does not run).
  C0 then counts every baseline import as missing (`c0_missing = c0_total`, null when the total
  is unknown: unknown is never 0) and each applicable C1..C4 fails, all with the category that
  names the cause (AGENT_GATES). C5 and env size, which are no pass/fail stages, are `not_run`
  with the same category, so their owner is recorded too.
- `not_run` with an infra category: the harness could not measure it. Such an attempt is an
  infra_error row (retried, never scored), except `infra_assets_missing` under
  `--skip-missing-assets` (reb_ray.trial.record.settle_rows): the stage stays unmeasured, the
  rest of the trial is scored.

Each rule returns `StageVerdict`s (the stage row fields and the trials-row columns to set); the
trial recorder writes them and `regrade` applies them to stored rows, so both give one answer.
"""

from __future__ import annotations

from reb_ray.grading.record_types import conform
from reb_ray.grading.verdict import StageVerdict
from reb_ray.grading.vocabulary import Category, Status
from reb_ray.models.task import TaskSpec

#: Probe stages in the order the probe phase runs them.
PROBE_STAGES = ("c0", "c1", "c2", "c3", "c4", "c5", "env_size")
#: The pass/fail stages of the pyramid: an agent gate makes each applicable one a failure.
PYRAMID = ("c0", "c1", "c2", "c3", "c4")
#: Stages a task command runs, the only ones an asset can be needed by (reb_ray.models.task.Asset).
COMMAND_STAGES = ("c1", "c3", "c4")

MISSING_REPORT, INVALID_REPORT = Category.MISSING_REPORT.value, Category.INVALID_REPORT.value
INTERPRETER_MISSING, INTERPRETER_BROKEN = Category.INTERPRETER_MISSING.value, Category.INTERPRETER_BROKEN.value
SANDBOX_BROKEN = Category.SANDBOX_BROKEN_BY_AGENT.value
AGENT_PROCESS_IN_PROBES = Category.AGENT_PROCESS_IN_PROBES.value  # seen from outside (reb_ray.trial.process_audit)
#: Categories that say the agent is why no stage could be measured (all agent categories).
#: A sandbox limit that ended the agent phase (reb_ray.sandbox.limits): nothing is probed.
LIMIT_GATES = (Category.PIDS_LIMIT.value, Category.DISK_QUOTA.value, Category.OOM.value)
AGENT_GATES = (MISSING_REPORT, INVALID_REPORT, SANDBOX_BROKEN, AGENT_PROCESS_IN_PROBES, INTERPRETER_MISSING, INTERPRETER_BROKEN, *LIMIT_GATES)
ASSETS_MISSING = Category.INFRA_ASSETS_MISSING.value

#: Trials-row columns of each stage, nulled when the stage was not measured (a re-grade of an
#: old row must not keep, say, the exit code 127 of a C4 that ran without an interpreter).
STAGE_COLUMNS = {
    "c0": ("c0_status", "c0_missing", "c0_missing_modules", "c0_missing_source", "c0_missing_source_modules",
           "c0_guarded_modules", "c0_repo_path_modules", "c0_editable_hooks", "pyright_version",
           "c0_unowned", "c0_unowned_modules"),
    "c1": ("c1_status", "c1_exit_code", "c1_failure_category"),
    "c2": ("c2_status", "c2_failure_category", "c2_torch_version", "c2_cuda_build", "c2_device_count", "c2_capability"),
    "c3": ("c3_status", "c3_exit_code", "c3_failure_category"),
    "c4": ("c4_status", "c4_exit_code", "c4_failure_category", "c4_port"),
    "c5": ("c5_status", "c5_path", "c5_version", "c5_capability", "c5_underclaims", "c5_report_faults",
           "c5_report_fault_keys"),
    "env_size": ("env_size_status", "env_size_bytes", "env_size_apparent_bytes"),
}


def skip_reason(task: TaskSpec, stage: str) -> str | None:
    """The spec's skip reason when `stage` (c0..c5, env_size) does not apply to `task`, else None.

    C0, C5 and env size apply to every task; C1..C4 as the spec's stages say.
    """
    spec = {"c1": task.stages.cpu, "c2": task.stages.cuda, "c3": task.stages.single_gpu,
            "c4": task.stages.multi_gpu}.get(stage)
    if spec is None or spec.applicable:
        return None
    return spec.skip_reason or "not applicable"


#: The fields of probes/facts_probe.py's record that the graders read, and their JSON types
#: (reb_ray.grading.record_types: a field of another type counts as absent).
FACTS_SHAPE = {
    "error": str, "python_path": str, "python_is_absolute": bool, "python_exists": bool, "python_is_file": bool,
    "python_executable": bool, "python_runs": bool, "python_run_error": str, "python_run_timed_out": bool,
    "python_version": str, "python_platform_version": str, "torch_version": str, "torch_import_ok": bool,
    "torch_import_error": str, "torch_import_timed_out": bool,
}


def interpreter_fault(facts: dict | None) -> tuple[str, str] | None:
    """(category, reason) when the facts probe saw that the report's interpreter cannot run.

    `facts` is probes/facts_probe.py's record. Missing -> interpreter_missing; not a regular
    executable file, or it ran and failed -> interpreter_broken. None when it runs, when its
    run timed out (a slow node is no evidence against the agent; the stages run with their own
    deadlines) and when there is no usable record (unknown, never a verdict).
    """
    if not isinstance(facts, dict):
        return None
    facts = conform(facts, FACTS_SHAPE)
    if facts.get("error") or facts.get("python_runs"):
        return None
    python = facts.get("python_path")
    if not facts.get("python_exists"):
        relative = " (not an absolute path, as the report contract requires)" if facts.get("python_is_absolute") is False else ""
        return INTERPRETER_MISSING, f"report python_path {python} does not exist{relative}"
    if not facts.get("python_executable"):
        what = "not a regular file" if not facts.get("python_is_file") else "not executable"
        return INTERPRETER_BROKEN, f"report python_path {python} is {what}"
    if facts.get("python_run_timed_out"):
        return None
    return INTERPRETER_BROKEN, f"report python_path {python} does not run: {facts.get('python_run_error') or 'unknown error'}"


def _verdict(stage: str, status: str, reason: str | None, category: str | None, **row) -> StageVerdict:
    columns = {column: None for column in STAGE_COLUMNS[stage]}
    columns.update(row, **{f"{stage}_status": status})
    if stage in ("c1", "c2", "c3", "c4"):
        columns[f"{stage}_failure_category"] = category if status == Status.FAILURE else None
    return StageVerdict(stage, status, reason, category, row=columns)


def skipped(task: TaskSpec, stage: str) -> StageVerdict | None:
    """The verdict of a stage the spec does not apply to, or None when it applies."""
    why = skip_reason(task, stage)
    return None if why is None else _verdict(stage, Status.SKIPPED, why, None)


def agent_failed(task: TaskSpec, stages: tuple[str, ...] | list[str], category: str, reason: str) -> list[StageVerdict]:
    """Verdicts of `stages` when the agent is why they could not be measured (`category` in AGENT_GATES).

    Not applicable -> skipped (spec reason); C0 -> failure with c0_missing = the task's C0 total;
    C1..C4 -> failure; C5, env size -> not_run. All carry `category` and `reason`.
    """
    out = []
    for stage in stages:
        verdict = skipped(task, stage)
        if verdict is None and stage == "c0":
            verdict = _verdict("c0", Status.FAILURE, reason, category, c0_missing=task.c0_baseline_total)
        elif verdict is None:
            verdict = _verdict(stage, Status.FAILURE if stage in PYRAMID else Status.NOT_RUN, reason, category)
        out.append(verdict)
    return out


def assets_missing(stage: str, names: list[str], where: str) -> StageVerdict:
    """The verdict of a command stage left unmeasured because assets `names` are not in `where`."""
    listed = ", ".join(repr(n) for n in names)
    return _verdict(stage, Status.NOT_RUN, f"missing asset {listed} in {where} (--skip-missing-assets)", ASSETS_MISSING)
