"""The main job: expand a sweep, run its trials on Ray, write Parquet, print the summary."""

from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from reb_ray.errors import RebRayError
from reb_ray.llm.budget import RetryBackoff, SweepBudget
from reb_ray.models.sweep import SweepConfig, TrialSpec
from reb_ray.orchestrators.durations import estimator
from reb_ray.orchestrators.expand import expand
from reb_ray.results.compact import CompactionResult, compact_if_idle
from reb_ray.results.parquet_sink import ParquetSink
from reb_ray.trial.record import TrialOutcome

log = logging.getLogger(__name__)


@dataclass
class SweepResult:
    """What a sweep did: its id, attempts written, trials skipped by resume, wall seconds, slot
    workers started. The rows themselves are only in the Parquet datasets: the driver keeps no
    outcome once it is written (a sweep of a million trials holds none in memory).

    With `--max-cost-usd`: `budget` says what the sweep's rows record as spent (earlier runs
    included), `not_launched` how many trials the spent budget left unlaunched (0: none).
    `compaction`: the end-of-sweep compaction of the sweep's result files."""

    sweep_id: str
    attempts: int = 0
    scored: int = 0
    infra_errors: int = 0
    skipped: int = 0
    wall_time_s: float = 0.0
    budget: SweepBudget | None = None
    not_launched: int = 0
    compaction: CompactionResult | None = None  # None: nothing written, or another sink still writes there
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


def _history(config: SweepConfig):
    """Median wall seconds of earlier attempts in the output directory (every sweep), for
    longest-first dispatch (reb_ray/orchestrators/durations.py); none when they cannot be read."""
    from reb_ray.errors import RebRayError
    from reb_ray.orchestrators.durations import table_medians
    from reb_ray.results.read import read_trials

    try:
        return table_medians(read_trials(config.output.resolve(), columns=["agent", "task_id", "status",
                                                                            "trial_wall_time_s"]))
    except RebRayError:
        return {}, {}


def _key_names(config: SweepConfig) -> list[str]:
    """The variables of the sweep's agents that may hold secrets (their key and credential
    variables): with reb_ray.llm.keys.KNOWN_KEY_VARS, what no Ray process may inherit."""
    from reb_ray.agents import get_agent

    return [name for agent in config.agents for name in get_agent(config.agent_spec(agent)).credential_names()]


def _init_ray(address: str | None, secrets: list[str] = ()) -> None:
    """Joins the cluster at `address`, or starts a local Ray (none given). The provider key
    variables and `secrets` are out of the environment while Ray starts: its head processes
    are this process's children and its workers theirs, so none inherits a key
    (reb_ray/llm/keys.py)."""
    import ray

    from reb_ray.llm.keys import scrubbed

    if ray.is_initialized():
        return
    # Workers must import reb_ray from the same place as the driver (a source checkout too).
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {"env_vars": {"PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}}
    # No --address means a new local Ray, never whatever cluster this machine happens to run
    # (Ray's own default for address=None is to join it).
    with scrubbed(secrets):
        ray.init(address=address or "local", include_dashboard=False, log_to_driver=False, configure_logging=False,
                 runtime_env=env)


def run_sweep(config: SweepConfig, show_progress: bool = True, *, slot_start_concurrency: int | None = None) -> SweepResult:
    """Run every not-yet-scored trial of `config`; rows are written as each attempt finishes.

    `slot_start_concurrency`: slot workers started at once (None: all; a cluster simulated on
    one machine, whose raylets share its cores, starts them faster a few at a time)."""
    from reb_ray.orchestrators.address import probe
    from reb_ray.orchestrators.ray_orchestrator import RayOrchestrator

    if config.address:  # a wrong address fails in seconds (not after Ray's minutes), before anything is written
        probe(config.address)
    image = _prepare_sandbox(config)
    specs, skipped = expand(config, image)
    result = SweepResult(sweep_id=config.resolved_sweep_id(), skipped=skipped)
    drift = _check_identity(config, image, result.sweep_id)
    if config.max_cost_usd is not None:  # what earlier runs of the sweep spent counts (a resume continues)
        result.budget = SweepBudget.from_rows(config.max_cost_usd, config.output.resolve(), result.sweep_id)
        if result.budget.reached:
            result.not_launched = len(specs)
            return result
    if not specs:
        return result
    start = time.monotonic()
    _init_ray(config.address, _key_names(config))
    from reb_ray.orchestrators.node_check import NodeRequirements

    # No --max-concurrent: as many trials as the live cluster's slots hold (a node that joins adds its own).
    orchestrator = RayOrchestrator(config.max_concurrent, config.cpus_per_trial, docker_image=image, budget=result.budget,
                                   backoff=RetryBackoff(config.llm_retry_backoff_s, config.llm_retry_backoff_max_s),
                                   expected_s=estimator(medians=_history(config)), slot_start_concurrency=slot_start_concurrency,
                                   requirements=NodeRequirements.for_sweep(config, image),
                                   on_node_line=lambda line: _node_line(config, result.sweep_id, line),
                                   memory_bytes=config.memory_bytes, share_gpus=config.share_gpus_in_agent_phase)
    sink = ParquetSink(config.output)
    wandb = _open_wandb(config, result.sweep_id)
    counts = {"running": 0, "done": 0, "failed": 0}
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TextColumn("running {task.fields[running]}  agent-failed {task.fields[failed]}  infra-retried {task.fields[infra]}"), TimeElapsedColumn(),
                  disable=not show_progress) as progress:
        bar = progress.add_task(f"sweep {result.sweep_id}", total=len(specs), running=0, failed=0, infra=0)

        def on_start(spec: TrialSpec) -> None:
            counts["running"] += 1
            progress.update(bar, running=counts["running"])

        def on_outcome(outcome: TrialOutcome, retry: bool) -> None:
            outcome.trial["config_drift"] = drift or None
            _store_artifacts(config, outcome)  # before the rows that name them
            sink.write([outcome.trial], outcome.stages)  # Parquet first, always
            if wandb is not None:
                wandb.rows([outcome.trial], outcome.stages)
            counts["running"] -= 1
            result.attempts += 1
            if outcome.status == "scored":
                result.scored += 1
            else:
                result.infra_errors += 1
            if not retry:
                counts["done"] += 1
                counts["failed"] += outcome.trial.get("failure_owner") == "agent"
            progress.update(bar, completed=counts["done"], running=counts["running"], failed=counts["failed"],
                            infra=result.infra_errors)

        try:
            orchestrator.run(specs, on_outcome, on_start)
        finally:
            sink.close()  # every row on disk, the run lock released
    result.compaction = compact_if_idle(config.output, result.sweep_id)  # a few files per sweep (issue 12)
    if wandb is not None:  # after Parquet is whole and compacted: the artifact holds the final files
        _finish_wandb(wandb, config, result.sweep_id)
    result.not_launched = len(orchestrator.not_launched)
    result.slot_workers = orchestrator.slots_created
    result.wall_time_s = time.monotonic() - start
    return result


def sweep_log(config: SweepConfig, sweep_id: str) -> Path:
    """The sweep's log of cluster events (nodes that failed their check), one line each, UTC
    time first: `<output>/.reb-ray/logs/sweep-<id>.log`."""
    from reb_ray.results.layout import CONTROL_DIR, sweep_dir_name

    return config.output.resolve() / CONTROL_DIR / "logs" / f"{sweep_dir_name(sweep_id)}.log"


def _node_line(config: SweepConfig, sweep_id: str, line: str) -> None:
    """A node that fails its check: one line on the terminal (stderr) and in the sweep's log."""
    import datetime as dt

    print(line, file=sys.stderr, flush=True)
    log.warning("%s", line)
    path = sweep_log(config, sweep_id)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as f:
            f.write(f"{dt.datetime.now(dt.timezone.utc).isoformat(timespec='seconds')} {line}\n")
    except OSError as exc:
        log.warning("sweep log %s: %s", path, exc)


def _store_artifacts(config: SweepConfig, outcome: TrialOutcome) -> None:
    """Write the logs a worker shipped with the outcome (reb_ray/artifacts.py) into the output
    directory; on failure the rows stay, their artifact paths cleared and the reason noted."""
    from reb_ray.trial import artifacts

    files, outcome.artifacts = outcome.artifacts, {}
    if not files:
        return
    try:
        artifacts.store(config.output.resolve(), files)
    except (OSError, ValueError) as exc:
        log.warning("trial %s: its logs could not be stored: %s", outcome.trial.get("trial_id"), exc)
        outcome.trial["failure_reason"] = (outcome.trial.get("failure_reason") or "") + f" [logs lost: {exc}]"
        for row in (outcome.trial, *outcome.stages):
            for key in artifacts.PATH_COLUMNS:
                if key in row:
                    row[key] = None


def _check_identity(config: SweepConfig, image: str | None, sweep_id: str) -> list[str]:
    """The fields allowed to drift since the sweep's first run (reb_ray/sweep_identity.py);
    raises RebRayError naming them when drift is not allowed."""
    from reb_ray.models.suite import load_suite, select_tasks
    from reb_ray.sweep_identity import check_identity, scoring_identity

    from reb_ray.results.read import scored_trial_ids

    tasks = select_tasks(load_suite(config.suite, config.tasks_root), config.tasks)
    scored = bool(scored_trial_ids(config.output.resolve(), sweep_id))
    return check_identity(config.output.resolve(), sweep_id, scoring_identity(config, image, tasks), config.allow_drift,
                          scored=scored)


def _open_wandb(config: SweepConfig, sweep_id: str):
    """The sweep's W&B run (reb_ray/wandb_log.py), or None without --wandb. Raises RebRayError
    when the `wandb` extra is not installed (before any trial runs)."""
    if not config.wandb_project:
        return None
    try:
        import wandb  # noqa: F401
    except ImportError:
        raise RebRayError("--wandb: the wandb package is not installed (pip install 'reb-ray[wandb]')") from None
    from reb_ray.results.schema import STAGES_SCHEMA, TRIALS_SCHEMA
    from reb_ray.wandb_log import WandbLog

    return WandbLog(config.wandb_project, config.output.resolve(), sweep_id,
                    config.model_dump(mode="json"), TRIALS_SCHEMA.names, STAGES_SCHEMA.names)


def _wandb_plots(config: SweepConfig, sweep_id: str, trials, out_dir) -> dict:
    """{plot name: PNG path} of the sweep's analysis plots (analysis/plots.py), drawn under
    `out_dir`; empty, with a warning, when matplotlib is missing or the stages are unreadable."""
    from pathlib import Path

    from analysis.analyze import STAGE_COLUMNS, analyze
    from analysis.plots import PLOTS, plot_path, write_plots
    from reb_ray.results.read import read_stages

    try:
        analysis = analyze(trials, read_stages(config.output, sweep_id, columns=STAGE_COLUMNS))
        write_plots(analysis, Path(out_dir))
    except Exception as exc:  # noqa: BLE001  the plots are extra: they never fail a sweep whose rows are written
        log.warning("W&B plots skipped: %s: %s", type(exc).__name__, exc)
        return {}
    paths = {plot: plot_path(Path(out_dir), sweep_id, plot) for plot in PLOTS}
    return {plot: path for plot, path in paths.items() if path.is_file()}


def _finish_wandb(wandb, config: SweepConfig, sweep_id: str) -> None:
    """Summary metrics per agent (the numbers `reb-ray report` prints), the analysis plots
    (`plots/<name>` images, drawn in a temporary directory that outlives the bounded finish)
    and the Parquet datasets."""
    import tempfile

    from analysis.scores import summarize
    from reb_ray.results.read import read_trials

    summary: dict = {}
    trials = None
    try:
        trials = read_trials(config.output, sweep_id)
        for row in summarize(trials):
            for key, value in row.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    summary[f"{row['agent']}/{key}"] = value
    except RebRayError as exc:  # no rows yet: the run still finishes
        log.warning("W&B summary skipped: %s", exc)
    output = config.output.resolve()
    with tempfile.TemporaryDirectory(prefix="reb-ray-wandb-plots-") as tmp:
        plots = _wandb_plots(config, sweep_id, trials, tmp) if trials is not None and trials.num_rows else {}
        wandb.finish(summary, plots=plots, datasets=[output / "trials", output / "stages"], timeout_s=config.wandb_timeout_s)
