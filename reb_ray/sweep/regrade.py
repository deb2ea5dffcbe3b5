"""Re-grading stored raw probe outputs offline: no containers, the same pure graders.

`regrade(run_dir)` reads the `trials` and `stages` datasets, reads each stage's raw record back
into the type the probe phase graded (`CommandRecord`, `AuditRecord`, ...) and calls the same
`grade_stage`, so it recomputes every stage result,
C5 and the trial's failure owner from the raw outputs kept in the stage rows (pyright JSON,
C2/C4/facts records, exit codes and bounded logs; a log pattern from the verdict streamed at
run time or the full-log artifact when the kept log is truncated: `pattern_evidence`), and
returns rows for a new sweep id
`<sweep_id>-regrade` (rewritten if it exists). Only scored attempts are re-graded: infra errors
have nothing to grade; earlier gradings (`-regrade` and `--rerun-probes`' `-reprobe` sweeps) are
left alone unless named with `sweep_id`.
Today's rules apply to old rows too: stages the agent left nothing to measure with (no report,
a broken sandbox, a missing or broken interpreter seen in the stored facts) become its failures,
stages the task spec does not apply to are skipped (`skip_reason`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from reb_ray.trial.artifacts import search_log
from reb_ray.errors import RebRayError
from reb_ray.grading.stage import AuditRecord, CommandRecord, GradeContext, StartupRecord, grade_stage
from reb_ray.grading.unmeasured import (AGENT_PROCESS_IN_PROBES, INVALID_REPORT, MISSING_REPORT, PROBE_STAGES, PYRAMID, SANDBOX_BROKEN,
                                        agent_failed, interpreter_fault)
from reb_ray.grading.verdict import StageVerdict
from reb_ray.models.report import load_report_object
from reb_ray.models.task import SuccessRule, TaskSpec
from reb_ray.suite.load import load_suite
from reb_ray.results.read import latest_attempts, read_stages, read_trials
from reb_ray.sweep.reprobe import GRADING_SUFFIXES, HARBOR_WHY, split_harbor
from reb_ray.trial.record import LOG_KEEP, TrialOutcome, settle_rows
from reb_ray.trial.result import StageRow


def _log(stage: dict) -> str:
    return (stage.get("log_head") or "") + (stage.get("log_tail") or "")


def _facts(stages: dict[str, dict]) -> dict | None:
    raw = (stages.get("c5") or {}).get("raw")
    return json.loads(raw).get("facts") if raw else None


def _unusable_report(trial: dict, stages: dict[str, dict]) -> dict | None:
    """The stored report's JSON object when the report was recorded invalid but is an object
    (its python_path was not usable, or a rule of an older version rejected it), else None."""
    if trial.get("report_status") != INVALID_REPORT:
        return None
    written, _ = load_report_object((stages.get("report") or {}).get("raw"))
    return written


def _agent_gate(trial: dict, stages: dict[str, dict]) -> tuple[str, str] | None:
    """(category, reason) when the agent left nothing to measure with and nothing probed: no
    usable report, or a sandbox it broke (both recorded before any probe ran)."""
    if trial.get("report_status") in (MISSING_REPORT, INVALID_REPORT):
        why = (stages.get("report") or {}).get("reason") or trial["report_status"]
        return trial["report_status"], f"no usable report: {why}"
    broken = next((s for s in stages.values() if s["failure_category"] in (SANDBOX_BROKEN, AGENT_PROCESS_IN_PROBES)), None)
    return (broken["failure_category"], broken["reason"]) if broken else None


def pattern_evidence(stage: dict, rule: SuccessRule, run_dir: Path | None) -> tuple[bool | None, str | None, bool]:
    """(pattern verdict for the grader, a note for the row's reason, decidable) for one stored
    command-stage row under the task's current success `rule`.

    The whole output decides, never a truncated head and tail: the verdict streamed at run
    time (when the row watched this very pattern), else a search of the full-log artifact
    (when it is whole), else the kept log when it is the whole output (verdict None: the
    grader searches it). A truncated log that holds the pattern still proves it; one that
    does not cannot disprove it: then `decidable` is False and the caller keeps the original
    verdict. Rows written before the evidence columns existed count as possibly truncated,
    unless their head is shorter than the row keeps (then it is the whole output).
    """
    truncated = stage.get("output_truncated")
    if truncated is None and not stage.get("log_tail") and len(stage.get("log_head") or "") < LOG_KEEP:
        truncated = False
    dropped = stage.get("output_dropped_bytes")
    cut = f"log truncated ({dropped} bytes not kept in the row)" if truncated else "log possibly truncated"
    if rule.log_pattern is None or stage.get("exit_code") != rule.exit_code or stage.get("timed_out"):
        return None, cut if truncated else None, True
    if stage.get("log_pattern") == rule.log_pattern and stage.get("log_pattern_matched") is not None:
        return stage["log_pattern_matched"], f"{cut}; pattern judged on the whole output as it streamed" if truncated else None, True
    if truncated is False:
        return None, None, True
    if run_dir is not None and stage.get("log_path") and stage.get("log_cut_bytes") == 0:
        try:
            found = search_log(run_dir / stage["log_path"], [rule.log_pattern])[rule.log_pattern]
            return found, f"{cut}; pattern searched in the full log artifact {stage['log_path']}", True
        except (OSError, EOFError):
            pass
    if re.search(rule.log_pattern, _log(stage), re.MULTILINE):
        return True, f"{cut}; pattern found in the kept part", True
    return None, f"{cut}: the pattern cannot be judged on the kept part, original verdict kept", False


def _stored_witness(raw: str | None) -> tuple[bool, dict | None]:
    """(whether the stage ran witnessed, its collected witness record) from a command stage
    row's raw JSON; rows written before the witness existed ran unwitnessed."""
    try:
        data = json.loads(raw) if raw else None
    except ValueError:
        return False, None
    if not isinstance(data, dict) or "witness" not in data:
        return False, None
    return True, data["witness"]


def _command_record(stage: dict, rule: SuccessRule, run_dir: Path | None) -> CommandRecord:
    """A command stage's raw record read back from its stage row: the kept output, the pattern
    evidence (`pattern_evidence`; the stored verdict is kept when it cannot be judged) and the
    stored witness."""
    matched, note, decidable = pattern_evidence(stage, rule, run_dir)
    witnessed, witness = _stored_witness(stage.get("raw"))
    prior = None if decidable else {k: stage[k] for k in ("status", "failure_category", "reason")}
    fields = dict(pattern_matched=matched, witnessed=witnessed, witness=witness, note=note, prior=prior)
    if stage["stage"] == "c4":
        return CommandRecord.of_launcher(dict(json.loads(stage["raw"]), output=_log(stage)), **fields)
    return CommandRecord(stage["exit_code"], bool(stage["timed_out"]), _log(stage), **fields)


def regrade_trial(trial: dict, stages: dict[str, dict], task: TaskSpec, new_sweep_id: str,
                  run_dir: Path | None = None) -> TrialOutcome:
    """One trial's rows re-graded from its stage rows (keyed by stage name), under today's rules:
    the same grader the probe phase uses (`grade_stage` on the raw records read back), so a
    re-grade of a fresh run changes nothing.
    `run_dir` is where the rows' log artifacts lie (their log_path is relative to it)."""
    row = dict(trial, sweep_id=new_sweep_id)
    out: list[StageRow] = []
    context = GradeContext(gpus_assigned=trial.get("gpus_assigned"), repo_modified_files=trial.get("repo_modified_files"),
                           repo_probe_changed=trial.get("repo_probe_changed"))

    def keep(name: str, **update) -> None:
        """The stored row of stage `name` (a new one, null but for the attempt's identity, when
        none was stored) under the new sweep id, with `update`'s columns."""
        base = stages.get(name) or {**{k: trial.get(k) for k in ("trial_id", "attempt", "task_id", "agent")},
                                    "stage": name}
        out.append(StageRow(**{**base, "sweep_id": new_sweep_id, **update}))

    def apply(verdicts: list[StageVerdict]) -> None:
        for verdict in verdicts:
            row.update(verdict.trial_columns())
            keep(str(verdict.stage), **verdict.stage_fields())

    def grade(name: str, raw) -> None:
        apply([grade_stage(name, raw, task, context)])

    for name in ("agent", "report"):
        if name in stages:
            keep(name)
    gate = _agent_gate(trial, stages)
    fault = interpreter_fault(_facts(stages)) if gate is None else None
    written = _unusable_report(trial, stages) if gate is not None else None
    if written is not None:  # a JSON object without a usable python_path: audited on its own words
        apply(agent_failed(task, tuple(s for s in PROBE_STAGES if s != "c5"), *gate))
        grade("c5", AuditRecord(written, probed=False))
    elif gate is not None:
        apply(agent_failed(task, PROBE_STAGES, *gate))
    elif fault is not None:
        apply(agent_failed(task, PYRAMID, *fault))
        _regrade_c5(row, stages, grade)
        apply(agent_failed(task, ("env_size",), *fault))
    else:
        _regrade_measured(stages, task, grade, run_dir)
        _regrade_c5(row, stages, grade)
        _regrade_env_size(stages, grade)
    _regrade_startup(stages, grade)
    for name in stages:
        if name not in {s.stage for s in out}:
            keep(name)
    row.update(settle_rows(out))
    return TrialOutcome(row, [stage.columns() for stage in out])


def _measured(stage: dict | None) -> bool:
    """Whether a stored stage row is a measurement to re-grade: it ran (success or failure), and
    is no failure for lack of GPUs (kept as it was)."""
    return bool(stage) and stage["status"] in ("success", "failure") and stage["failure_category"] != "insufficient_hardware"


def _regrade_measured(stages: dict[str, dict], task: TaskSpec, grade, run_dir: Path | None) -> None:
    """C0..C4 from their raw outputs; skipped as today's spec says; hardware and missing-asset rows as they were."""
    specs = {"c1": task.stages.cpu, "c2": task.stages.cuda, "c3": task.stages.single_gpu, "c4": task.stages.multi_gpu}
    for name in ("c1", "c2", "c3", "c4"):
        if name in stages and not specs[name].applicable:
            grade(name, None)  # skipped, with the spec's reason
    if "c0" in stages and stages["c0"]["status"] in ("success", "failure") and stages["c0"]["raw"]:
        grade("c0", json.loads(stages["c0"]["raw"]))
    for name in ("c1", "c3"):
        if specs[name].applicable and _measured(stages.get(name)):
            grade(name, _command_record(stages[name], specs[name].success, run_dir))
    stage2 = stages.get("c2")
    if specs["c2"].applicable and stage2 and stage2["status"] in ("success", "failure"):
        grade("c2", json.loads(stage2["raw"]) if stage2["raw"] else None)
    stage4 = stages.get("c4")
    if specs["c4"].applicable and stage4 and stage4["status"] in ("success", "failure") and stage4["raw"]:
        grade("c4", _command_record(stage4, specs["c4"].success, run_dir))


def _regrade_startup(stages: dict[str, dict], grade) -> None:
    """The start-up record from the `startup` row's stored evidence (the start-up probe's record,
    PYTHONSTARTUP, the trajectory hits) and the row's repo_modified_files; rows older than the
    start-up record keep theirs."""
    stage = stages.get("startup") or {}
    if not stage.get("raw"):
        return
    stored = json.loads(stage["raw"])
    grade("startup", StartupRecord(stored.get("probe"), stored.get("pythonstartup"), stored.get("trajectory_hits") or [],
                                   why_not=stage.get("reason"), installed=stored.get("installed")))


def _regrade_env_size(stages: dict[str, dict], grade) -> None:
    """Env size from the probe's stored record; rows older than that record keep theirs."""
    raw = (stages.get("env_size") or {}).get("raw")
    if raw:
        grade("env_size", json.loads(raw))


def _regrade_c5(row: dict, stages: dict[str, dict], grade) -> None:
    """C5 from the stored facts and the re-graded C2 / C4 (audit_report discounts stages that
    could not run for a broken interpreter)."""
    if "c5" not in stages or not stages["c5"]["raw"]:
        return
    stored = json.loads(stages["c5"]["raw"])
    report = json.loads(stages["report"]["raw"]) if (stages.get("report") or {}).get("raw") else None
    observed = dict(stored["observed"], c2_status=row.get("c2_status"), c4_status=row.get("c4_status"))
    grade("c5", AuditRecord(report, stored["facts"], observed))


def regrade(run_dir: Path, sweep_id: str | None = None, tasks_root: Path | None = None,
            note=None) -> list[TrialOutcome]:
    """Re-grade the current scored attempt of every trial under `run_dir` (optionally one
    sweep; `latest_attempts` says which attempt is current). Trials of Harbor tasks are left
    out (`split_harbor`), `note(line)` told how many.

    Raises RebRayError when a row's suite or task is no longer known, or every trial is a
    Harbor task's.
    """
    # Only each trial's current attempt (the rule every reader uses); a superseded one is history.
    trials = [t for t in latest_attempts(read_trials(run_dir, sweep_id)).to_pylist()
              if t["status"] == "scored" and (sweep_id or not t["sweep_id"].endswith(GRADING_SUFFIXES))]
    if not trials:
        which = f"sweep {sweep_id!r}" if sweep_id else "any sweep"
        raise RebRayError(f"{run_dir}: no scored trials of {which} to re-grade")
    trials, harbor = split_harbor(trials, run_dir, "re-graded")
    if harbor and note is not None:
        note(f"left out {len(harbor)} trial(s) of Harbor tasks (sweep {', '.join(sorted({r['sweep_id'] for r in harbor}))}): "
             + HARBOR_WHY)
    by_attempt: dict[tuple, dict[str, dict]] = {}
    for stage in read_stages(run_dir, sweep_id).to_pylist():
        by_attempt.setdefault((stage["sweep_id"], stage["trial_id"], stage["attempt"]), {})[stage["stage"]] = stage
    suites: dict[str, dict[str, TaskSpec]] = {}
    outcomes = []
    for trial in trials:
        suite = suites.setdefault(trial["suite"], {t.id: t for t in load_suite(trial["suite"], tasks_root)})
        if trial["task_id"] not in suite:
            raise RebRayError(f"task {trial['task_id']!r} is not in suite {trial['suite']!r} any more; pass --tasks-root")
        stages = by_attempt.get((trial["sweep_id"], trial["trial_id"], trial["attempt"]), {})
        outcomes.append(regrade_trial(trial, stages, suite[trial["task_id"]], f"{trial['sweep_id']}-regrade", run_dir))
    return outcomes
