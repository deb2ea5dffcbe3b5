"""The rows one trial attempt produces: a `trials` row and its `stages` rows."""

from __future__ import annotations

import datetime as dt
import socket
from dataclasses import dataclass, field

from reb_ray.agents.base import REPORT_PATH
from reb_ray.agents.prompt import render_prompt
from reb_ray.grading.categories import owner_of
from reb_ray.models.sweep import TrialSpec
from reb_ray.redact import Redactor
from reb_ray.sandbox import ExecResult

LOG_KEEP = 8 * 1024  # bytes of head and of tail kept per stage in the `stages` rows
RAW_KEEP = 4 * 1024 * 1024  # raw probe output kept for re-grading, per stage


def now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


@dataclass
class TrialOutcome:
    """The rows one attempt produced: `trial` for the trials dataset, `stages` for stages."""

    trial: dict
    stages: list[dict] = field(default_factory=list)

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
    """Collects the trial row and stage rows of one attempt, then settles who failed."""

    def __init__(self, spec: TrialSpec) -> None:
        self.spec = spec
        self.row: dict = {
            "sweep_id": spec.sweep_id, "trial_id": spec.trial_id, "attempt": spec.attempt,
            "trial_index": spec.trial_index, "task_id": spec.task.id, "suite": spec.task.suite,
            "agent": spec.agent, "node": socket.gethostname(), "sandbox_provider": spec.config.sandbox,
            "c0_total": spec.task.c0_baseline_total, "started_at": now(),
            "prompt_sha256": render_prompt(spec.task, REPORT_PATH).sha256, **agent_columns(spec),
        }
        self.stages: list[dict] = []

    def stage(self, stage: str, status: str, *, result: ExecResult | None = None, reason: str | None = None,
              failure_category: str | None = None, command: str | None = None, raw: str | None = None,
              duration_s: float | None = None) -> None:
        output = result.output if result is not None else ""
        self.stages.append({
            "sweep_id": self.spec.sweep_id, "trial_id": self.spec.trial_id, "attempt": self.spec.attempt,
            "task_id": self.spec.task.id, "agent": self.spec.agent, "stage": stage, "status": status,
            "reason": reason, "failure_category": failure_category, "command": command,
            "raw": raw[:RAW_KEEP] if raw else None,
            "exit_code": result.exit_code if result else None, "timed_out": result.timed_out if result else None,
            "duration_s": result.duration_s if result and duration_s is None else duration_s,
            "log_head": output[:LOG_KEEP] if result else None,
            "log_tail": output[-LOG_KEEP:] if result and len(output) > LOG_KEEP else None,
            # Rows are made when a stage ends: its start is that moment minus its duration.
            "started_at": now() - dt.timedelta(seconds=duration) if (duration := (
                result.duration_s if result and duration_s is None else duration_s)) else now(),
        })

    def not_run(self, stages: list[str], reason: str, failure_category: str | None = None) -> None:
        for name in stages:
            self.row[f"{name}_status"] = "not_run"
            self.stage(name, "not_run", reason=reason, failure_category=failure_category)

    def infra(self, category: str, message: str) -> None:
        self.row.update(status="infra_error", failure_owner="infra", failure_category=category,
                        failure_reason=f"{category}: {message}"[:2000])

    def settle(self) -> None:
        """Trial status, failure owner and category from the stage results (`settle_rows`)."""
        self.row.update(settle_rows(self.stages))

    def outcome(self, redactor: Redactor) -> TrialOutcome:
        self.row["finished_at"] = now()
        return TrialOutcome(redactor.row(self.row), [redactor.row(s) for s in self.stages])


def settle_rows(stages: list[dict]) -> dict:
    """The trial-level verdict of an attempt's stage rows (pure; used by re-grading too).

    Any infra category makes the attempt `infra_error` (retried, never scored). Otherwise it
    is scored; the first agent failure (a missing report included) makes the owner "agent";
    failures only for lack of GPUs make it "hardware". Returns status, failure_owner,
    failure_category and failure_reason.
    """
    failing = [s for s in stages if s["stage"] != "agent" and s["failure_category"]]
    by_owner: dict[str, list[dict]] = {}
    for stage in failing:
        by_owner.setdefault(owner_of(stage["failure_category"]), []).append(stage)
    for owner, status in (("infra", "infra_error"), ("agent", "scored"), ("hardware", "scored")):
        if owner in by_owner:
            first = by_owner[owner][0]
            return {"status": status, "failure_owner": owner, "failure_category": first["failure_category"],
                    "failure_reason": f"{first['failure_category']}: {first['stage']}: {first['reason']}"[:2000]}
    return {"status": "scored", "failure_owner": None, "failure_category": None, "failure_reason": None}
