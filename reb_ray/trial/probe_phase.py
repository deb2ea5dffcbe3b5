"""The probe phase of a trial: hidden stages C0-C5 and env size, run after the agent.

The toolbox enters the sandbox only now, so the agent never saw it. Each stage has its own
timeout and writes a stage row with its raw output, so `reb-ray regrade` can recompute
everything offline. GPUs: C1 sees none (a CPU run that needs a GPU must fail), C3 exactly one, C4 `ranks`; with fewer GPUs
assigned than a stage needs, it fails with `insufficient_hardware` (non-success, as in the
paper, and labelled as hardware, not agent). Stages the spec does not apply to are `skipped`
on every path; stages the agent left nothing to measure with are its failures; a command stage
whose asset is missing (only under --skip-missing-assets) is `not_run`, infra_assets_missing
(`skip_reason`, `agent_failed`). Every command stage (C1, C3, C4) runs witnessed: a fresh nonce
and the toolbox's hook make each interpreter it starts record what it ran, and a command that
succeeds without the pinned repository's code running in the reported interpreter fails as
`unverified_run` (`grade_witness`, docs/grading-witness.md).

This module runs the probes and stores their raw records; every grade, and every column it
sets, comes from `grade_stage` on those records, the one grader `reb-ray regrade` calls too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
import time
from contextlib import AbstractContextManager, nullcontext
from typing import Callable

from reb_ray.suite.assets import missing_by_stage
from reb_ray.errors import RebRayError
from reb_ray.grading.vocabulary import Stage
from reb_ray.grading.stage import AuditRecord, CommandRecord, GradeContext, StartupRecord, c5_observed, grade_stage
from reb_ray.grading.unmeasured import (INVALID_REPORT, PROBE_STAGES, SANDBOX_BROKEN, agent_failed, assets_missing,
                                        interpreter_fault, skipped)
from reb_ray.models.report import Report, load_report_object
from reb_ray.models.sweep import TrialSpec
from reb_ray.models.task import StageSpec, TaskSpec
from reb_ray.probing.c0 import run_c0
from reb_ray.probing.c2 import run_c2
from reb_ray.probing.command import run_stage_command, stage_workdir
from reb_ray.probing.env_size import run_env_size
from reb_ray.probing.facts import run_facts
from reb_ray.probing.installed import run_check as run_installed_check
from reb_ray.probing.installed import with_repo_imports as run_installed_repo_imports
from reb_ray.probing.multi_gpu import record_as_exec_result, run_multi_gpu
from reb_ray.probing.side_logs import collect_side_logs
from reb_ray.probing.startup import run_startup
from reb_ray.probing.task_helpers import install_task_helpers
from reb_ray.probing.toolbox import install_toolbox, toolbox_key, toolbox_sources
from reb_ray.probing.witness import Witness, arm, collect
from reb_ray.probing.observer import arm as observer_arm, collect as observer_collect
from reb_ray.grading.witness import stage_entries
from reb_ray.sandbox import Sandbox
from reb_ray.trial.record import TrialRecorder

ASSETS_MOUNT = "/opt/reb-ray/assets"
SCRATCH_DIR = "/tmp/reb-ray-out"  # writable scratch for stage outputs (task commands use it too)


def probe_env(spec: TrialSpec) -> dict[str, str]:
    """Variables every runtime stage gets: the asset cache, offline mode (never a download
    that hangs: a missing asset fails fast). The cache is mounted read-only, and `datasets`
    writes its processed copies and lock files under HF_HOME/datasets unless told otherwise, so
    HF_DATASETS_CACHE points at the scratch directory."""
    env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    if spec.config.assets_dir is not None:
        env.update(REB_RAY_ASSETS=ASSETS_MOUNT, HF_HOME=f"{ASSETS_MOUNT}/huggingface",
                   HF_DATASETS_CACHE=f"{SCRATCH_DIR}/hf-datasets")
    return env


def _healthy(sandbox: Sandbox) -> bool:
    """Whether the sandbox still runs a command: an agent that killed PID 1 or broke /bin/sh leaves
    nothing to probe, and that is its failure (`sandbox_broken_by_agent`), not a probe's."""
    try:
        return sandbox.exec("true", timeout=60).ok
    except RebRayError:
        return False


def _with_env(stage: StageSpec, extra: dict[str, str], witness: Witness | None = None) -> StageSpec:
    """`stage` with `extra` under its own variables, and the witness's over both (its
    PYTHONPATH already leads the stage's own)."""
    own = witness.env(stage.env) if witness is not None else {}
    return stage.model_copy(update={"env": {**extra, **stage.env, **own}})


@dataclass(frozen=True)
class ProbeRun:
    """What the runtime stages of one probe phase share: the recorder, the sandbox, the task, the
    repository's path in the sandbox, the report's interpreter, the toolbox's directory, the
    stages' environment (offline mode, the asset cache, the task helpers), the GPUs assigned, and
    the assets the node lacks by stage with where they were looked for."""

    rec: TrialRecorder
    sandbox: Sandbox
    task: TaskSpec
    repo_dir: str
    python: str
    toolbox: str
    env: dict[str, str]
    gpus: list[str]
    missing: dict
    where: str
    installed: dict | None = None  # the installed-code check's record, stored with each command stage's witness

    @property
    def shim(self) -> str:
        """The toolbox's shims, first on a command stage's PATH."""
        return f"{self.toolbox}/bin"


def run_probe_phase(rec: TrialRecorder, sandbox: Sandbox, spec: TrialSpec, repo_dir: str,
                    report: Report | None, gpus: list[str],
                    c1_sandbox: Callable[[], AbstractContextManager[Sandbox]] | None = None) -> None:
    """Run every stage for `report`'s interpreter and record rows. Raises InfraError(infra_toolbox).

    `c1_sandbox` (a GPU-sharing sweep, `PhaseSplit.c1_opener`): opens the sandbox C1 runs in, a
    copy of this one with no GPU device and the toolbox installed; None: C1 runs in `sandbox`.

    Stages the task does not apply to are `skipped` on every path. When the agent left nothing to
    measure with (no report, a broken sandbox, a report interpreter that is missing or does not
    run), nothing runs and the applicable stages are the agent's failures (unmeasured.agent_failed).
    """
    rec.result.probe.gpus_assigned = len(gpus)
    task = spec.task
    if report is None:
        stage = next((s for s in rec.stages if s.stage is Stage.REPORT), None)
        report_status = rec.result.between.report_status
        why = (stage.reason if stage else None) or report_status
        # A JSON object without a usable python_path is still audited (C5), on its own words.
        raw = stage.raw if stage else None
        written, _ = load_report_object(raw) if report_status == INVALID_REPORT else (None, None)
        gated = PROBE_STAGES if written is None else tuple(s for s in PROBE_STAGES if s != "c5")
        rec.apply(agent_failed(task, gated, report_status, f"no usable report: {why}"))
        if written is not None:
            rec.record(grade_stage("c5", AuditRecord(written, probed=False), task, _context(rec)))
        record_startup(rec, None, None, "no usable report")
        return
    if not _healthy(sandbox):
        rec.apply(agent_failed(task, PROBE_STAGES, SANDBOX_BROKEN, "sandbox does not run commands after the agent phase"))
        record_startup(rec, None, report, "the sandbox does not run commands")
        return
    toolbox = install_toolbox(sandbox)
    rec.result.probe.probe_toolbox = toolbox_key(toolbox_sources())  # which probes grade this attempt (a column)
    # Before anything runs the report's interpreter: what it is, what runs when it starts.
    t = time.monotonic()
    startup_raw = run_startup(sandbox, toolbox, report.python_path)
    # What is installed on its import path, against what was published (read from outside).
    installed = run_installed_check(sandbox, toolbox, startup_raw, spec, repo_dir)
    record_startup(rec, startup_raw, report, "the start-up probe left no record", time.monotonic() - t, installed)
    python = report.python_path
    env = {**probe_env(spec), **install_task_helpers(sandbox, task, toolbox)}

    # The facts probe first: it is also the check that the report's interpreter runs at all. If it
    # does not, every stage that needs it is judged once, for that one reason (never a second
    # failure, or a C5 lie, counted for the same broken interpreter).
    facts = run_facts(sandbox, toolbox, python)
    fault = interpreter_fault(facts)
    if fault is not None:
        rec.apply(agent_failed(task, ("c0", "c1", "c2", "c3", "c4"), *fault))
        _audit(rec, report, facts, None, len(gpus))
        rec.apply(agent_failed(task, ("env_size",), *fault))
        return

    # C0: static imports against the report's interpreter.
    t = time.monotonic()
    raw = run_c0(sandbox, toolbox, repo_dir, python)
    if isinstance(raw, dict) and installed is not None:
        raw["installed"] = installed
        installed = run_installed_repo_imports(installed, raw)  # the command stages judge these as imported
    rec.record(grade_stage("c0", raw, task, _context(rec)), raw=json.dumps(raw) if raw is not None else None,
               duration_s=time.monotonic() - t)

    missing = missing_by_stage(task, spec.config.assets_dir)
    where = str(spec.config.assets_dir or "(no --assets directory given)")

    # C1: the CPU command, GPUs hidden ("" makes torch see none).
    run = ProbeRun(rec, sandbox, task, repo_dir, python, toolbox, env, gpus, missing, where, installed)
    _command_stage(run, "c1", visible="", needed=0, own_sandbox=c1_sandbox)

    # C2: CUDA alignment, on the assigned GPUs.
    raw2 = _cuda_alignment(run)

    # C3: single GPU.
    _command_stage(run, "c3", visible="0", needed=1)

    # C4: multi GPU under its launcher, free rendezvous port.
    _multi_gpu(run, spec.config.sandbox.c4_cpu_gloo)

    # C5: the report against what the probes saw.
    _audit(rec, report, facts, (raw2 or {}).get("cuda_available"), len(gpus))

    # Environment size under the report interpreter's sys.prefix.
    size = run_env_size(sandbox, toolbox, python)
    rec.record(grade_stage("env_size", size, task, _context(rec)), raw=json.dumps(size))


def _context(rec: TrialRecorder) -> GradeContext:
    """What the grader needs of the attempt beyond a stage's raw record (as regrade reads it back)."""
    return GradeContext(gpus_assigned=rec.result.probe.gpus_assigned,
                        repo_modified_files=rec.result.between.repo_modified_files)


def record_startup(rec: TrialRecorder, raw: dict | None, report: Report | None, why_not: str,
                   duration_s: float | None = None, installed: dict | None = None) -> None:
    """The `startup` stage row (its raw: the start-up probe's record, the report env's
    PYTHONSTARTUP and the agent's trajectory hits, all `reb-ray regrade` needs) and the row's
    python_path_kind, startup_hooks and suspicious_actions (`grade_startup`). Never a
    failure: it is recorded, not scored (`not_run` with `why_not` when nothing was probed)."""
    env = report.written.get("env") if report is not None else None
    pythonstartup = env.get("PYTHONSTARTUP") if isinstance(env, dict) else None
    record = StartupRecord(raw, pythonstartup if isinstance(pythonstartup, str) else None, rec.trajectory_hits, why_not,
                           installed)
    rec.record(grade_stage("startup", record, rec.spec.task, _context(rec)), raw=json.dumps(record.stored()),
               duration_s=duration_s)


def _audit(rec: TrialRecorder, report: Report, facts: dict | None, cuda_available: bool | None, gpus: int) -> None:
    """C5 from the facts record and the stage results recorded so far."""
    observed = c5_observed(rec.row, cuda_available, gpus)
    rec.record(grade_stage("c5", AuditRecord(report.written, facts, observed), rec.spec.task, _context(rec)))


def _cuda_alignment(run: ProbeRun) -> dict | None:
    """C2: framework build, driver and GPU agree (a real kernel ran). Returns the raw record."""
    rec, sandbox, task, toolbox, python, gpus = run.rec, run.sandbox, run.task, run.toolbox, run.python, run.gpus
    if (verdict := skipped(task, "c2")) is not None:
        rec.apply([verdict])
        return None
    t = time.monotonic()
    raw2 = run_c2(sandbox, toolbox, python, ",".join(str(i) for i in range(len(gpus))))
    rec.record(grade_stage("c2", raw2, task, _context(rec)), raw=json.dumps(raw2) if raw2 is not None else None,
               duration_s=time.monotonic() - t)
    return raw2


def _command_stage(run: ProbeRun, name: str, visible: str, needed: int,
                   own_sandbox: Callable[[], AbstractContextManager[Sandbox]] | None = None) -> None:
    """C1 / C3: one command, judged by its success rule and its witness (a success without a
    valid witness is `unverified_run`). `visible`: CUDA_VISIBLE_DEVICES of the command ("" hides
    every GPU); `needed`: GPUs it needs. Too few GPUs is a hardware failure (it would fail with
    the assets too); a missing asset the stage needs leaves it unmeasured.
    `own_sandbox`: the stage runs in the sandbox it opens (opened only when the command runs)."""
    rec, sandbox, task, repo_dir, python, toolbox = run.rec, run.sandbox, run.task, run.repo_dir, run.python, run.toolbox
    env, shim, gpus, missing, where = run.env, run.shim, run.gpus, run.missing, run.where
    stage = task.stages.cpu if name == "c1" else task.stages.single_gpu
    if (verdict := skipped(task, name)) is not None:
        rec.apply([verdict])
        return
    if len(gpus) < needed:  # too few GPUs: the hardware's failure (it would fail with the assets too)
        rec.record(grade_stage(name, None, task, _context(rec)))
        return
    if name in missing:
        rec.apply([assets_missing(name, [a.name for a in missing[name]], where)])
        return
    with own_sandbox() if own_sandbox else nullcontext(sandbox) as box, rec.full_log(name) as log:
        witness, observer = arm(box, toolbox, python, repo_dir), observer_arm(box, toolbox, name)
        result = run_stage_command(box, _with_env(stage, env, witness), repo_dir, python, shim, visible_gpus=visible,
                                   sink=log, wrap=observer.wrap)
        side_logs = _side_logs(box, stage, repo_dir)
        witness_raw = collect(box, toolbox, witness, python, rec.result.setup.repo_commit)
        observed = observer_collect(box, observer, witness_raw, repo_dir, result.duration_s)
    if witness_raw is not None:  # the kernel's trace and the stage's entry, graded with the witness
        witness_raw.update(observer=observed, entries=stage_entries(stage.command, stage.workdir))
    if witness_raw is not None and run.installed is not None:
        witness_raw["installed"] = run.installed
    pattern = stage.success.log_pattern
    record = CommandRecord(result.exit_code, result.timed_out, result.output,
                           result.pattern_matches.get(pattern) if pattern else None, witnessed=True, witness=witness_raw)
    rec.record(grade_stage(name, record, task, _context(rec)), result=result,
               command=stage.command if isinstance(stage.command, str) else " ".join(stage.command),
               log_pattern=pattern, log=log, side_logs=side_logs, raw=json.dumps({"witness": witness_raw}))


def _multi_gpu(run: ProbeRun, cpu_gloo: bool) -> None:
    """C4: the multi-GPU command under its launcher with a free rendezvous port, witnessed on
    every rank; too few GPUs (and no `cpu_gloo` CPU form) is a hardware failure, a missing
    asset leaves it unmeasured."""
    rec, sandbox, task, repo_dir, python, toolbox = run.rec, run.sandbox, run.task, run.repo_dir, run.python, run.toolbox
    env, shim, gpus, missing, where = run.env, run.shim, run.gpus, run.missing, run.where
    stage4 = task.stages.multi_gpu
    if (verdict := skipped(task, "c4")) is not None:
        rec.apply([verdict])
    elif "c4" in missing and (len(gpus) >= stage4.ranks or cpu_gloo):  # else: hardware failure
        rec.apply([assets_missing("c4", [a.name for a in missing["c4"]], where)])
    else:
        runs = cpu_gloo or len(gpus) >= stage4.ranks
        witness = arm(sandbox, toolbox, python, repo_dir) if runs else None
        with rec.full_log("c4" if runs else None) as log:
            raw4 = run_multi_gpu(sandbox, _with_env(stage4, env, witness), repo_dir, python, shim, gpus,
                                 cpu_gloo=cpu_gloo, sink=log)
        if witness is not None:  # after the run's leftovers were killed: every rank has exited
            raw4["witness"] = collect(sandbox, toolbox, witness, python, rec.result.setup.repo_commit)
            if raw4["witness"] is not None and run.installed is not None:
                raw4["witness"]["installed"] = run.installed
        record4 = CommandRecord.of_launcher(raw4, witnessed=witness is not None, witness=raw4.get("witness"))
        rec.record(grade_stage("c4", record4, task, _context(rec)), result=record_as_exec_result(stage4, raw4),
                   command=raw4.get("command"), raw=json.dumps({k: v for k, v in raw4.items() if k != "output"}),
                   duration_s=raw4.get("duration_s"), log_pattern=stage4.success.log_pattern, log=log,
                   side_logs=_side_logs(sandbox, stage4, repo_dir) if runs else None)


def _side_logs(sandbox: Sandbox, stage: StageSpec, repo_dir: str) -> list[dict] | None:
    """The stage's declared side logs, collected after it ran (None when it declares none)."""
    if not stage.side_logs:
        return None
    return collect_side_logs(sandbox, stage.side_logs, stage_workdir(stage, repo_dir))
