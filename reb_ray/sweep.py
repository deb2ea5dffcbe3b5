"""The main job: expand a sweep, run its trials on Ray, write Parquet, print the summary."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from reb_ray.llm.budget import RetryBackoff, SweepBudget
from reb_ray.models.sweep import SweepConfig, TrialSpec
from reb_ray.orchestrators.durations import estimator
from reb_ray.orchestrators.expand import expand
from reb_ray.results.parquet_sink import ParquetSink
from reb_ray.trial import TrialOutcome


@dataclass
class SweepResult:
    """What a sweep did: its id, attempts written, trials skipped by resume, wall seconds, slot
    workers started.

    With `--max-cost-usd`: `budget` says what the sweep's rows record as spent (earlier runs
    included), `not_launched` how many trials the spent budget left unlaunched (0: none)."""

    sweep_id: str
    attempts: int = 0
    scored: int = 0
    infra_errors: int = 0
    skipped: int = 0
    wall_time_s: float = 0.0
    outcomes: list[TrialOutcome] = field(default_factory=list)
    budget: SweepBudget | None = None
    not_launched: int = 0
    slot_workers: int = 0  # slot worker actors started (replacements included)


def _prepare_sandbox(config: SweepConfig) -> str | None:
    """Reap orphans of dead sweeps (F13) and resolve the image tag (docker only).

    Raises DockerUnavailable or ImageMissing with the one-line fix.
    """
    from reb_ray.errors import UnknownName
    from reb_ray.sandbox import PROVIDERS

    if config.sandbox not in PROVIDERS:
        raise UnknownName("sandbox provider", config.sandbox, list(PROVIDERS))
    if config.sandbox != "docker":
        return None
    from reb_ray.sandbox.docker_client import connect
    from reb_ray.sandbox.image import require_image
    from reb_ray.sandbox.reaper import reap

    client = connect()
    reap(client)
    return require_image(client, config.image_profile)


def _history(config: SweepConfig) -> list[dict]:
    """Earlier attempts in the output directory (every sweep), for expected trial durations
    (reb_ray/orchestrators/durations.py); none when they cannot be read."""
    from reb_ray.errors import RebRayError
    from reb_ray.results.read import read_trials

    try:
        table = read_trials(config.output.resolve())
    except RebRayError:
        return []
    return table.select(["agent", "task_id", "status", "trial_wall_time_s"]).to_pylist()


def _init_ray(address: str | None) -> None:
    import ray

    if ray.is_initialized():
        return
    # Workers must import reb_ray from the same place as the driver (a source checkout too).
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {"env_vars": {"PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}}
    # No --address means a new local Ray, never whatever cluster this machine happens to run
    # (Ray's own default for address=None is to join it).
    ray.init(address=address or "local", include_dashboard=False, log_to_driver=False, configure_logging=False, runtime_env=env)


def run_sweep(config: SweepConfig, show_progress: bool = True, *, slot_start_concurrency: int | None = None) -> SweepResult:
    """Run every not-yet-scored trial of `config`; rows are written as each attempt finishes.

    `slot_start_concurrency`: slot workers started at once (None: all; a cluster simulated on
    one machine, whose raylets share its cores, starts them faster a few at a time)."""
    import ray

    from reb_ray.orchestrators.ray_orchestrator import RayOrchestrator

    image = _prepare_sandbox(config)
    specs, skipped = expand(config, image)
    result = SweepResult(sweep_id=config.resolved_sweep_id(), skipped=skipped)
    if config.max_cost_usd is not None:  # what earlier runs of the sweep spent counts (a resume continues)
        result.budget = SweepBudget.from_rows(config.max_cost_usd, config.output.resolve(), result.sweep_id)
        if result.budget.reached:
            result.not_launched = len(specs)
            return result
    if not specs:
        return result
    start = time.monotonic()
    _init_ray(config.address)
    cluster_cpus = int(ray.cluster_resources().get("CPU", 1))
    max_concurrent = config.max_concurrent or max(1, int(cluster_cpus // config.cpus_per_trial))
    sink = ParquetSink(config.output)
    orchestrator = RayOrchestrator(max_concurrent, config.cpus_per_trial, docker_image=image, budget=result.budget,
                                   backoff=RetryBackoff(config.llm_retry_backoff_s, config.llm_retry_backoff_max_s),
                                   expected_s=estimator(_history(config)), slot_start_concurrency=slot_start_concurrency)
    counts = {"running": 0, "done": 0, "failed": 0}
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TextColumn("running {task.fields[running]}  agent-failed {task.fields[failed]}  infra-retried {task.fields[infra]}"), TimeElapsedColumn(),
                  disable=not show_progress) as progress:
        bar = progress.add_task(f"sweep {result.sweep_id}", total=len(specs), running=0, failed=0, infra=0)

        def on_start(spec: TrialSpec) -> None:
            counts["running"] += 1
            progress.update(bar, running=counts["running"])

        def on_outcome(outcome: TrialOutcome, retry: bool) -> None:
            sink.write([outcome.trial], outcome.stages)
            counts["running"] -= 1
            result.attempts += 1
            result.outcomes.append(outcome)
            if outcome.status == "scored":
                result.scored += 1
            else:
                result.infra_errors += 1
            if not retry:
                counts["done"] += 1
                counts["failed"] += outcome.trial.get("failure_owner") == "agent"
            progress.update(bar, completed=counts["done"], running=counts["running"], failed=counts["failed"],
                            infra=result.infra_errors)

        orchestrator.run(specs, on_outcome, on_start)
    result.not_launched = len(orchestrator.not_launched)
    result.slot_workers = orchestrator.slots_created
    result.wall_time_s = time.monotonic() - start
    return result
