"""One grader per stage, from its raw record: `grade_stage(name, raw, task, context)`.

The rule: a stage is graded in exactly one place. The probe phase runs a probe, keeps its raw
record in the stage row and calls `grade_stage`; `reb-ray regrade` reads the stored raw record
back and calls the same function. The verdict (`StageVerdict`) carries every column the grade
decides, in the trials row and in the stage row, so a re-grade of a live run cannot disagree
with it on any column. What neither the probe phase nor regrade may do is turn a grade into a
column themselves.

Raw records, by stage (each as stored, so regrade rebuilds it from the stage row):

- c0: the C0 probe's record (pyright's JSON and the interpreter's search paths), or None;
- c1, c3, c4: a `CommandRecord` (exit code, timeout, kept output, the streamed verdict on the
  success pattern, the witness record; for C4 the launcher's record too), or None when the
  stage did not run because fewer GPUs were assigned than it needs;
- c2: the C2 probe's record, or None;
- c5: an `AuditRecord` (the report as written, the facts record, what the probes observed);
- env_size: the env-size probe's record;
- startup: a `StartupRecord`.

`GradeContext` holds what is not in the raw record: the number of GPUs assigned to the attempt
(C2's missing device on a trial given no GPU is the hardware's, `insufficient_hardware`, not
the agent's; C1 and C3 with too few GPUs likewise) and the repository files the agent changed
(the start-up record's suspicious actions).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from reb_ray.grading.probe_changes import charge_probe_changes
from reb_ray.grading.c0 import grade_c0
from reb_ray.grading.c2 import grade_c2
from reb_ray.grading.c5 import C5_ROW_COLUMNS, audit_report, audit_unprobed
from reb_ray.grading.command_stage import grade_command_stage
from reb_ray.grading.installed import apply_installed
from reb_ray.grading.multi_gpu import grade_multi_gpu
from reb_ray.grading.startup import grade_startup
from reb_ray.grading.unmeasured import skipped
from reb_ray.grading.verdict import StageVerdict
from reb_ray.grading.vocabulary import Category, Stage, Status
from reb_ray.grading.witness import WITNESS_COLUMNS, apply_witness, grade_witness
from reb_ray.models.task import TaskSpec

#: GPUs each command stage needs: C1 runs with none visible, C3 on one (C4's ranks come from its spec).
GPUS_NEEDED = {"c1": 0, "c3": 1}
#: C2 categories that mean "no usable GPU": the hardware's when the attempt was assigned none.
NO_GPU_CATEGORIES = (Category.NO_DEVICE, Category.DRIVER_TOO_OLD)
UNPROBED_REASON = "audited on the report alone: no usable python_path to probe"


@dataclass(frozen=True)
class GradeContext:
    """What grading needs beyond a stage's raw record. `gpus_assigned`: GPUs given to the
    attempt (None: unknown, graded as none); `repo_modified_files`: the repository files the
    agent changed (the trials row's repo_modified_files)."""

    gpus_assigned: int | None = None
    repo_modified_files: list[str] | None = None
    #: tracked files that changed during the probe phase, read from outside (`charge_probe_changes`)
    repo_probe_changed: list[str] | None = None


@dataclass(frozen=True)
class CommandRecord:
    """The raw record of a command stage (C1, C3, C4) run.

    `output`: the kept output; `pattern_matched`: the verdict of the success pattern over the
    whole output (streamed at run time, or searched in the full log), None to search `output`;
    `witnessed`: the stage ran with the witness armed (rows older than the witness did not),
    `witness` its collected record; `launcher`: C4's record (port, ranks, status hint,
    leftovers). For a re-grade: `note` says what evidence judged the pattern (appended to the
    reason), and `prior` ({status, failure_category, reason}) is the verdict kept when the
    pattern cannot be judged on what was kept.
    """

    exit_code: int | None
    timed_out: bool
    output: str = ""
    pattern_matched: bool | None = None
    witnessed: bool = False
    witness: dict | None = None
    launcher: dict | None = None
    note: str | None = None
    prior: Mapping[str, Any] | None = None

    @classmethod
    def of_launcher(cls, launcher: dict, **fields) -> CommandRecord:
        """C4's record from the launcher's raw record (its exit code, timeout, output and pattern verdict)."""
        base = {"exit_code": launcher.get("exit_code"), "timed_out": bool(launcher.get("timed_out")),
                "output": launcher.get("output") or "", "pattern_matched": launcher.get("log_pattern_matched")}
        return cls(launcher=launcher, **{**base, **fields})


@dataclass(frozen=True)
class AuditRecord:
    """C5's raw record: `report` (the report's JSON object as written), `facts` (the facts probe's
    record), `observed` (the stage results C5 compares claims with: c2_status, c2_device_count,
    c2_cuda_available, c4_status, gpus_assigned). `probed` False: the report had no usable
    python_path, so it is audited on its own words alone."""

    report: dict | None
    facts: dict | None = None
    observed: dict | None = None
    probed: bool = True


@dataclass(frozen=True)
class StartupRecord:
    """The start-up record: the probe's record (None: nothing was probed, for `why_not`), the
    report env's PYTHONSTARTUP and the agent's suspicious trajectory commands."""

    probe: dict | None
    pythonstartup: str | None = None
    trajectory_hits: list[str] = field(default_factory=list)
    why_not: str | None = None
    #: the installed-code check's record (reb_ray.grading.installed), None: not checked
    installed: dict | None = None

    def stored(self) -> dict:
        """The JSON kept in the `startup` stage row's raw."""
        return {"probe": self.probe, "pythonstartup": self.pythonstartup, "trajectory_hits": self.trajectory_hits,
                "installed": self.installed}


def grade_stage(name: str, raw: Any, task: TaskSpec, context: GradeContext = GradeContext()) -> StageVerdict:
    """The verdict on stage `name` of `task` from its raw record (module docstring). Stages the
    spec does not apply to are `skipped` whatever the record."""
    stage = Stage(name)
    if stage in (Stage.C1, Stage.C2, Stage.C3, Stage.C4) and (verdict := skipped(task, stage)) is not None:
        return verdict
    if stage is Stage.C0:
        return _c0(raw, task)
    if stage in (Stage.C1, Stage.C3):
        return charge_probe_changes(_command(stage, raw, task, context), context.repo_probe_changed)
    if stage is Stage.C2:
        return _c2(raw, context)
    if stage is Stage.C4:
        return charge_probe_changes(_c4(raw, task), context.repo_probe_changed)
    if stage is Stage.C5:
        return _c5(raw, context)
    if stage is Stage.ENV_SIZE:
        return _env_size(raw)
    if stage is Stage.STARTUP:
        return _startup(raw, context)
    raise ValueError(f"stage {name!r} is not graded from a probe record (graded: c0..c5, env_size, startup)")


def _c0(raw: dict | None, task: TaskSpec) -> StageVerdict:
    """C0 columns from pyright's record; a failure without a category of its own is `deps`."""
    c0 = grade_c0(raw, task.c0_baseline_total)
    category = c0["failure_category"] or (Category.DEPS if c0["c0_status"] == Status.FAILURE else None)
    return StageVerdict(Stage.C0, c0["c0_status"], c0["reason"], category,
                        row={k: v for k, v in c0.items() if k not in ("reason", "failure_category")})


def _witnessed(stage: Stage, graded: dict, record: CommandRecord) -> tuple[dict, dict, dict]:
    """(graded under the witness verdict, trials-row witness column, stage-row witness columns);
    unchanged and no columns for a stage that ran unwitnessed."""
    if not record.witnessed:
        return graded, {}, {}
    verdict = grade_witness(record.witness)
    return (apply_installed(apply_witness(graded, verdict), record.witness), {f"{stage}_witness": verdict["witness_status"]},
            {k: verdict[k] for k in WITNESS_COLUMNS})


def _command(stage: Stage, record: CommandRecord | None, task: TaskSpec, context: GradeContext) -> StageVerdict:
    """C1 / C3: the success rule, then the witness (a success without a valid witness is
    `unverified_run`); no record with too few GPUs is the hardware's failure."""
    spec = task.stages.cpu if stage is Stage.C1 else task.stages.single_gpu
    needed, assigned = GPUS_NEEDED[stage], context.gpus_assigned or 0
    if record is None:
        if assigned < needed:
            return StageVerdict(stage, Status.FAILURE, f"needs {needed} GPU(s), {assigned} assigned",
                                Category.INSUFFICIENT_HARDWARE,
                                row={f"{stage}_status": Status.FAILURE,
                                     f"{stage}_failure_category": Category.INSUFFICIENT_HARDWARE})
        raise ValueError(f"stage {stage}: no command record to grade and {assigned} GPU(s) assigned (needs {needed})")
    if record.prior is not None:
        graded = {k: record.prior.get(k) for k in ("status", "failure_category", "reason")}
    else:
        graded = grade_command_stage(spec, record.exit_code, record.timed_out, record.output, record.pattern_matched)
    graded, row, columns = _witnessed(stage, graded, record)
    graded = _with_note(graded, record.note)
    return StageVerdict(stage, graded["status"], graded["reason"], graded["failure_category"],
                        row={f"{stage}_status": graded["status"], f"{stage}_exit_code": record.exit_code,
                             f"{stage}_failure_category": graded["failure_category"], **row},
                        columns=columns)


def _c4(record: CommandRecord | None, task: TaskSpec) -> StageVerdict:
    """C4 under its launcher's record (too few GPUs: the launcher's hint), then its witness."""
    spec = task.stages.multi_gpu
    launcher = None if record is None else dict(record.launcher or {}, exit_code=record.exit_code,
                                                 timed_out=record.timed_out, output=record.output,
                                                 log_pattern_matched=record.pattern_matched)
    if record is not None and record.prior is not None:
        graded = {k: record.prior.get(k) for k in ("status", "failure_category", "reason")}
    else:
        graded = grade_multi_gpu(spec, launcher)
    row, columns = {}, {}
    if record is not None:
        graded, row, columns = _witnessed(Stage.C4, graded, record)
        graded = _with_note(graded, record.note)
    return StageVerdict(Stage.C4, graded["status"], graded["reason"], graded["failure_category"],
                        row={"c4_status": graded["status"], "c4_exit_code": (launcher or {}).get("exit_code"),
                             "c4_failure_category": graded["failure_category"], "c4_port": (launcher or {}).get("port"),
                             **row},
                        columns=columns)


def _with_note(graded: dict, note: str | None) -> dict:
    if note:
        graded = dict(graded, reason=f"{graded['reason']}; {note}" if graded["reason"] else note)
    return graded


def _c2(raw: dict | None, context: GradeContext) -> StageVerdict:
    """C2's columns; no device (or a driver too old) on an attempt given no GPU is the hardware's."""
    c2 = grade_c2(raw)
    category = c2["failure_category"]
    if category in NO_GPU_CATEGORIES and not context.gpus_assigned:
        category = Category.INSUFFICIENT_HARDWARE  # no GPU was assigned: the node's lack, not the agent's
    return StageVerdict(Stage.C2, c2["c2_status"], c2["reason"], category,
                        row={"c2_status": c2["c2_status"], "c2_failure_category": category,
                             "c2_torch_version": c2["c2_torch_version"], "c2_cuda_build": c2["c2_cuda_build"],
                             "c2_device_count": c2["c2_device_count"], "c2_capability": c2["c2_capability"]})


def c5_observed(row: Mapping[str, Any], cuda_available: bool | None, gpus_assigned: int | None) -> dict:
    """What C5 compares the report's capability claims with: the C2 and C4 results of `row` (the
    trials row as graded so far), C2's cuda_available and the GPUs assigned."""
    return {"c2_status": row.get("c2_status"), "c2_device_count": row.get("c2_device_count"),
            "c2_cuda_available": cuda_available, "c4_status": row.get("c4_status"), "gpus_assigned": gpus_assigned}


def _c5(record: AuditRecord, context: GradeContext) -> StageVerdict:
    """The C5 audit: on the probes' facts, or (no usable python_path) on the report alone."""
    if not record.probed:
        c5 = audit_unprobed(record.report, context.gpus_assigned)
        status, reason = Status.SUCCESS, UNPROBED_REASON
    else:
        c5 = audit_report(record.report, record.facts, record.observed or {})
        probed = record.facts is not None
        status = Status.SUCCESS if probed else Status.NOT_RUN
        reason = None if probed else "facts probe produced no record"
    raw = {"facts": record.facts, "observed": record.observed, "items": c5["c5_items"]}
    return StageVerdict(Stage.C5, status, reason, None, row={**{k: c5[k] for k in C5_ROW_COLUMNS}, "c5_status": status},
                        columns={"raw": json.dumps(raw)})


def _env_size(raw: dict) -> StageVerdict:
    """The environment's size under the report interpreter's sys.prefix (recorded, not scored)."""
    return StageVerdict(Stage.ENV_SIZE, raw["status"], raw.get("reason") or raw.get("prefix"), None,
                        row={"env_size_status": raw["status"], "env_size_bytes": raw.get("env_size_bytes"),
                             "env_size_apparent_bytes": raw.get("env_size_apparent_bytes")})


def _startup(record: StartupRecord, context: GradeContext) -> StageVerdict:
    """python_path_kind, startup_hooks and suspicious_actions (`grade_startup`): recorded, never a
    failure (`not_run` with the reason nothing was probed)."""
    row = grade_startup(record.probe, pythonstartup=record.pythonstartup,
                        repo_modified_files=context.repo_modified_files, trajectory=record.trajectory_hits,
                        installed=record.installed)
    probed = record.probe is not None
    return StageVerdict(Stage.STARTUP, Status.SUCCESS if probed else Status.NOT_RUN,
                        None if probed else record.why_not, None, row=row)


__all__ = ["AuditRecord", "CommandRecord", "GradeContext", "StartupRecord", "c5_observed", "grade_stage"]
