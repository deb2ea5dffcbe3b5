"""The rows one trial attempt produces: a `trials` row and its `stages` rows.

`TrialRecorder` collects them as the attempt's `AttemptResult` (reb_ray.trial.result), the
stage rows as typed `StageRow`s; its `flatten` makes the rows' dicts; `TrialOutcome`, those
dicts, is what reaches the driver."""

from __future__ import annotations

import datetime as dt
import socket
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Iterator, Mapping

from reb_ray.agents.base import REPORT_PATH
from reb_ray.agents.prompt import render_prompt
from reb_ray.grading.vocabulary import Category, Stage, Status, category, owner_of, plain
from reb_ray.grading.unmeasured import ASSETS_MISSING, STAGE_COLUMNS, skipped
from reb_ray.grading.verdict import StageVerdict
from reb_ray.models.sweep import TrialSpec
from reb_ray.redact import Redactor
from reb_ray.sandbox import ExecResult
from reb_ray.sandbox.output import TRUNCATION_MARK_RE
from reb_ray.trial.result import AttemptIdentity, AttemptResult, StageRow, flatten

if TYPE_CHECKING:
    from reb_ray.trial.artifacts import LogArtifact, TrialArtifacts

LOG_KEEP = 8 * 1024  # bytes of head and of tail kept per stage in the `stages` rows
RAW_KEEP = 4 * 1024 * 1024  # raw probe output kept for re-grading, per stage


def now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


@dataclass
class TrialOutcome:
    """The rows one attempt produced: `trial` for the trials dataset, `stages` for stages, and
    `artifacts`, the attempt's log files ({path relative to the output directory: bytes},
    reb_ray.trial.artifacts.collect) when the caller asked for them to be shipped, else empty."""

    trial: dict
    stages: list[dict] = field(default_factory=list)
    artifacts: dict[str, bytes] = field(default_factory=dict)

    @property
    def status(self) -> str:
        return self.trial["status"]


def agent_columns(spec: TrialSpec) -> dict:
    """`agent_kind` and `agent_model` of the trial's agent spec (`agent` is the spec's name)."""
    try:
        agent = spec.agent_spec
    except ValueError:  # a name no spec or shorthand gives: get_agent reports it as the row's failure
        return {"agent_kind": None, "agent_model": None}
    return {"agent_kind": agent.kind, "agent_model": agent.model}


class TrialRecorder:
    """Collects one attempt's result (`AttemptResult`: each phase sets its typed part) and its
    stage rows, then settles who failed. `row` is the trials row as recorded so far, read-only
    (`flatten`): for what a later step reads of an earlier one's columns."""

    def __init__(self, spec: TrialSpec) -> None:
        self.spec = spec
        agent = agent_columns(spec)
        self.result = AttemptResult(identity=AttemptIdentity(
            sweep_id=spec.sweep_id, trial_id=spec.trial_id, attempt=spec.attempt, trial_index=spec.trial_index,
            task_id=spec.task.id, suite=spec.task.suite, agent=spec.agent, agent_kind=agent["agent_kind"],
            agent_model=agent["agent_model"], node=socket.gethostname(), sandbox_provider=spec.config.sandbox.provider,
            c0_total=spec.task.c0_baseline_total, started_at=now(), rerun=spec.rerun,
            prompt_sha256=render_prompt(spec.task, REPORT_PATH).sha256, sweep_max_cost_usd=spec.config.llm.max_cost_usd,
            network_policy=spec.config.network.policy, gpu_sharing=spec.config.cluster.share_gpus_in_agent_phase))
        self.artifacts: TrialArtifacts | None = None  # where full output logs go (set by run_trial)
        self.trajectory_hits: list[str] = []  # suspicious commands of the agent's transcript (reb_ray.grading.startup)
        self.agent_commands: list[dict] | None = None  # the agent's execs (TappedSandbox.commands); None: it never ran
        self.agent_prompt = None  # the Prompt the agent was given (reb_ray.agents.prompt); None: it never ran

    @property
    def row(self) -> Mapping[str, Any]:
        """The trials row as recorded so far (read-only: a phase sets its part of `result`)."""
        return MappingProxyType(self.result.trials_row())

    @property
    def stages(self) -> list[StageRow]:
        """The stage rows recorded so far, in order."""
        return self.result.stages

    @stages.setter
    def stages(self, rows: list[StageRow]) -> None:
        self.result.stages = rows

    @contextmanager
    def full_log(self, name: str | None) -> Iterator[LogArtifact | None]:
        """The full-output artifact `<name>.log.gz` of this attempt, closed on exit; None when
        there are no artifacts, `name` is None, or the file cannot be created (then the
        row's log_path stays null: unknown, never a torn file)."""
        log = None
        if self.artifacts is not None and name is not None:
            try:
                log = self.artifacts.log(name)
            except OSError:
                log = None
        try:
            yield log
        finally:
            if log is not None:
                log.close()

    def stage(self, stage: str, status: str, *, result: ExecResult | None = None, reason: str | None = None,
              failure_category: str | None = None, command: str | None = None, raw: str | None = None,
              duration_s: float | None = None, log_pattern: str | None = None, log: LogArtifact | None = None,
              side_logs: list[dict] | None = None, total_bytes: int | None = None) -> StageRow:
        """Add a stage row and return it. With `result`: its kept output, whether that is the
        whole output (`total_bytes` overrides result.total_bytes, e.g. summed over the agent's
        execs), and the streamed verdict on `log_pattern`; `log`: the closed full-log artifact.
        Raises ValueError for a stage or status that is no member of the grading vocabulary
        (`Stage`, `Status`), UnknownCategory for such a failure category."""
        output = result.output if result is not None else ""
        head = output[:LOG_KEEP] if result else None
        tail = output[max(LOG_KEEP, len(output) - LOG_KEEP):] or None if result else None
        truncated, dropped = (_evidence(head, tail, result.total_bytes if total_bytes is None else total_bytes)
                              if result else (None, None))
        kept_log = log is not None and log.error is None
        duration = result.duration_s if result and duration_s is None else duration_s
        row = StageRow(
            sweep_id=self.spec.sweep_id, trial_id=self.spec.trial_id, attempt=self.spec.attempt,
            task_id=self.spec.task.id, agent=self.spec.agent, stage=stage, status=status, reason=reason,
            exit_code=result.exit_code if result else None, timed_out=result.timed_out if result else None,
            failure_category=failure_category, duration_s=duration, command=command,
            log_head=head, log_tail=tail, raw=raw[:RAW_KEEP] if raw else None,
            # Rows are made when a stage ends: its start is that moment minus its duration.
            started_at=now() - dt.timedelta(seconds=duration) if duration else now(),
            output_truncated=truncated, output_dropped_bytes=dropped, log_pattern=log_pattern,
            log_pattern_matched=result.pattern_matches.get(log_pattern) if result and log_pattern else None,
            side_logs=side_logs, log_path=log.path if kept_log else None,
            log_cut_bytes=log.dropped_bytes if kept_log else None,
        )
        self.stages.append(row)
        return row

    def not_run(self, stages: list[str], reason: str, failure_category: str | None = None) -> None:
        """Record `stages` as not_run for `reason`; those the task spec does not apply to are
        `skipped` with the spec's reason instead (applicability comes from the spec alone)."""
        for name in stages:
            verdict = skipped(self.spec.task, name) if name in STAGE_COLUMNS else None
            if verdict is not None:
                self.apply([verdict])
            elif name in STAGE_COLUMNS:  # its status column says not_run; its other columns stay null
                why = category(failure_category) if failure_category else None
                self.record(StageVerdict(Stage(name), Status.NOT_RUN, reason, why, row={f"{name}_status": "not_run"}))
            else:
                self.stage(name, "not_run", reason=reason, failure_category=failure_category)

    def record(self, verdict: StageVerdict, **fields) -> None:
        """Write one stage's verdict: its trials-row columns and a stage row with its status,
        reason, category and further columns; `fields` are the stage row's evidence (result,
        command, raw, log, ...: `stage`'s keywords), never a grade."""
        self.result.probe.verdicts.append(verdict)
        decided = verdict.stage_fields()
        extra = {k: v for k, v in decided.items() if k not in ("status", "reason", "failure_category", "raw")}
        if "raw" in decided:
            fields["raw"] = decided["raw"]
        row = self.stage(verdict.stage, decided["status"], reason=decided["reason"],
                         failure_category=decided["failure_category"], **fields)
        row.set(**extra)

    def apply(self, verdicts: list[StageVerdict]) -> None:
        """Record stages that were not measured (reb_ray.grading.unmeasured verdicts)."""
        for verdict in verdicts:
            self.record(verdict)

    def explain_hardware(self, why: str) -> None:
        """Append `why` (e.g. the node's Docker cannot give containers GPUs) to the reason of
        every stage failed as `insufficient_hardware`."""
        for stage in self.stages:
            if stage.failure_category is Category.INSUFFICIENT_HARDWARE:
                stage.reason = f"{stage.reason}: {why}" if stage.reason else why

    def infra(self, category: str, message: str) -> None:
        """Settle the attempt as an infra error of `category` (retried, never scored)."""
        self.result.settlement.set(status="infra_error", failure_owner="infra", failure_category=category,
                                   failure_reason=f"{category}: {message}"[:2000])

    def settle(self) -> None:
        """Trial status, failure owner and category from the stage results (`settle_rows`)."""
        self.result.settlement.set(**settle_rows(self.stages))

    def outcome(self, redactor: Redactor) -> TrialOutcome:
        """The attempt's rows (`flatten`), finished now, with the agent's credentials masked."""
        self.result.identity.finished_at = now()
        trial, stages = flatten(self.result)
        return TrialOutcome(redactor.row(trial), [redactor.row(s) for s in stages])


#: Which failed stage names the trial's failure: the highest of the pyramid (C4 over C3 over ...
#: over C0), then the report; a stage not listed ranks below them all.
_RANK = {"c4": 6, "c3": 5, "c2": 4, "c1": 3, "c0": 2, "report": 1}


def _evidence(head: str | None, tail: str | None, total_bytes: int) -> tuple[bool, int]:
    """(output_truncated, output_dropped_bytes) of a row keeping `head` and `tail` of an output
    of `total_bytes` bytes (a sandbox truncation mark inside them is not output). Invalid UTF-8
    is counted as its replacement characters, so the count may be off by a few bytes then."""
    kept = TRUNCATION_MARK_RE.sub("", (head or "") + (tail or ""))
    dropped = max(0, total_bytes - len(kept.encode()))
    return dropped > 0, dropped


def settle_rows(stages: list[StageRow]) -> dict:
    """The trial-level verdict of an attempt's stage rows (pure; used by re-grading too).

    Any infra category makes the attempt `infra_error` (retried, never scored), except a stage
    left `not_run` for a missing asset (`infra_assets_missing`: only `--skip-missing-assets`
    records those; they are counted in stages_missing_assets, never failures). Otherwise it is
    scored; any agent failure (a missing report included) makes the owner "agent", failures
    only for lack of GPUs make it "hardware". failure_category and failure_reason come from the
    owner's highest failed stage (`_RANK`; for infra the first, the one that stopped the
    attempt), and failure_reason adds the agent limit that fired (the agent stage's reason,
    e.g. agent_timeout_s=600). Returns status, failure_owner, failure_category, failure_reason,
    stages_missing_assets (int, 0 when none).
    """
    def unmeasured(stage: StageRow) -> bool:
        return stage.status is Status.NOT_RUN and stage.failure_category == ASSETS_MISSING

    missing_assets = sum(1 for s in stages if unmeasured(s))
    limit = next((s.reason for s in stages if s.stage is Stage.AGENT and s.reason), None)
    failing = [s for s in stages if s.stage is not Stage.AGENT and s.failure_category and not unmeasured(s)]
    by_owner: dict[str, list[StageRow]] = {}
    for stage in failing:
        by_owner.setdefault(owner_of(stage.failure_category), []).append(stage)
    for owner, status in (("infra", "infra_error"), ("agent", "scored"), ("hardware", "scored")):
        if owner in by_owner:
            named = by_owner[owner][0] if owner == "infra" else max(by_owner[owner], key=lambda s: _RANK.get(s.stage, 0))
            reason = f"{named.failure_category}: {named.stage}: {named.reason}"
            if limit and owner != "infra":
                reason += f" [agent limit {limit} fired]"
            return {"status": status, "failure_owner": owner, "failure_category": plain(named.failure_category),
                    "failure_reason": reason[:2000], "stages_missing_assets": missing_assets}
    return {"status": "scored", "failure_owner": None, "failure_category": None, "failure_reason": None,
            "stages_missing_assets": missing_assets}
