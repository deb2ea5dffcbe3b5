"""Running trial specs on Ray: one actor per running trial, each owning its sandbox.

Resources per trial come from the trial (CPUs; GPUs as the task needs, capped by the largest
node, so a trial never waits forever for GPUs that do not exist). Concurrency is bounded by
`max_concurrent` and by what Ray can place. Each outcome goes to the sink the moment it
arrives; infrastructure failures are retried as new attempts (`max_attempts` per run). On Ctrl-C
the actors are killed and their containers reaped; rows already written stay.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Callable

import ray

from reb_ray.models.sweep import TrialSpec
from reb_ray.trial import TrialOutcome, run_trial


@ray.remote
class TrialActor:
    """Owns one trial's sandbox for the trial's lifetime."""

    def run(self, spec: TrialSpec) -> TrialOutcome:
        gpus = [str(g) for g in ray.get_gpu_ids()]
        return run_trial(spec, gpus)


def max_gpus_per_node() -> int:
    """The most GPUs any alive node of the cluster has."""
    return max((int(n["Resources"].get("GPU", 0)) for n in ray.nodes() if n.get("Alive")), default=0)


def infra_outcome(spec: TrialSpec, category: str, message: str) -> TrialOutcome:
    """A row for an attempt whose actor died or was killed before returning."""
    row = {
        "sweep_id": spec.sweep_id, "trial_id": spec.trial_id, "attempt": spec.attempt, "trial_index": spec.trial_index,
        "task_id": spec.task.id, "suite": spec.task.suite, "agent": spec.agent, "sandbox_provider": spec.config.sandbox,
        "c0_total": spec.task.c0_baseline_total, "status": "infra_error", "failure_owner": "infra",
        "failure_reason": f"{category}: {message}"[:2000],
    }
    return TrialOutcome(row, [])


class RayOrchestrator:
    """Schedules trial specs on the connected Ray cluster.

    `on_outcome(outcome, will_retry)` is called on the driver for every finished attempt;
    `on_start(spec)` when an attempt is launched. An infra failure is retried as a new
    attempt while the spec has `retries_left`.
    """

    def __init__(self, max_concurrent: int, cpus_per_trial: float) -> None:
        self.max_concurrent = max_concurrent
        self.cpus_per_trial = cpus_per_trial
        self.gpu_cap = max_gpus_per_node()

    def run(self, specs: list[TrialSpec], on_outcome: Callable[[TrialOutcome, bool], None],
            on_start: Callable[[TrialSpec], None] = lambda spec: None) -> None:
        pending = deque(specs)
        inflight: dict[ray.ObjectRef, tuple[ray.actor.ActorHandle, TrialSpec]] = {}
        try:
            while pending or inflight:
                while pending and len(inflight) < self.max_concurrent:
                    spec = pending.popleft()
                    gpus = min(spec.task.gpus_needed, self.gpu_cap)
                    actor = TrialActor.options(num_cpus=self.cpus_per_trial, num_gpus=gpus).remote()
                    inflight[actor.run.remote(spec)] = (actor, spec)
                    on_start(spec)
                ready, _ = ray.wait(list(inflight), num_returns=1, timeout=1.0)
                for ref in ready:
                    actor, spec = inflight.pop(ref)
                    try:
                        outcome = ray.get(ref)
                    except ray.exceptions.RayError as exc:
                        outcome = infra_outcome(spec, "infra_node", str(exc).splitlines()[0][:500])
                    ray.kill(actor)
                    retry = outcome.status == "infra_error" and spec.retries_left > 0
                    on_outcome(outcome, retry)
                    if retry:
                        pending.append(spec.next_attempt())
        finally:
            for actor, _spec in inflight.values():
                ray.kill(actor)
            if inflight:
                _reap_after_kill()


def _reap_after_kill() -> None:
    """Killed actors leave their containers behind: their owner is gone, so the reaper takes them."""
    from reb_ray.errors import RebRayError
    from reb_ray.sandbox.reaper import reap

    time.sleep(1.0)  # let the killed worker processes exit so their owners read as gone
    try:
        reap()
    except RebRayError:
        pass
