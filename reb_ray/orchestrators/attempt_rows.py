"""Rows the driver writes for attempts that produced none themselves: an attempt whose slot
worker died, and a trial no node of the cluster can ever hold (recorded at once: Ray would
keep its request pending for ever)."""

from __future__ import annotations

import datetime as dt

from reb_ray.models.sweep import TrialSpec
from reb_ray.trial.record import TrialOutcome
from reb_ray.trial.record import agent_columns, now


def driver_outcome(spec: TrialSpec, category: str, message: str, *, owner: str = "infra", node: str | None = None,
                   started_at: dt.datetime | None = None) -> TrialOutcome:
    """A `trials` row (no stage rows) for an attempt that returned none: status infra_error,
    never scored, `failure_owner` `owner`, `failure_reason` "category: message" (2,000 chars).

    `node` is the host the attempt ran on, `started_at` when it started (UTC); None: unknown.
    It carries the attempt's agent kind and model, as a row the attempt wrote would.
    """
    finished = now()
    row = {
        "sweep_id": spec.sweep_id, "trial_id": spec.trial_id, "attempt": spec.attempt, "trial_index": spec.trial_index,
        "task_id": spec.task.id, "suite": spec.task.suite, "agent": spec.agent, "sandbox_provider": spec.config.sandbox.provider,
        "c0_total": spec.task.c0_baseline_total, "status": "infra_error", "failure_owner": owner,
        "failure_category": category, "failure_reason": f"{category}: {message}"[:2000],
        "node": node, "started_at": started_at, "finished_at": finished, "rerun": spec.rerun,
        "trial_wall_time_s": (finished - started_at).total_seconds() if started_at else None,
        "sweep_max_cost_usd": spec.config.llm.max_cost_usd, "network_policy": spec.config.network.policy,
        "gpu_sharing": spec.config.cluster.share_gpus_in_agent_phase, **agent_columns(spec),
    }
    return TrialOutcome(row, [])


def unplaceable_outcome(spec: TrialSpec, why: str) -> TrialOutcome:
    """The trial needs more than any node can give (`why` says what). Recorded at once, owner
    hardware, category insufficient_hardware, never retried in this run; not scored, so a resume
    on a cluster that can hold it runs it."""
    return driver_outcome(spec, "insufficient_hardware", why, owner="hardware")
