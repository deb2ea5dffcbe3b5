"""The main job: expand a sweep, run its trials on Ray, write Parquet, print the summary."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from reb_ray.errors import RebRayError, first_line
from reb_ray.scheduling.budget import SweepBudget
from reb_ray.models.sweep import SweepConfig, TrialSpec
from reb_ray.scheduling.durations import estimator, table_medians
from reb_ray.sweep.expand import expand
from reb_ray.sweep.identity import check_identity, scoring_identity
from reb_ray.sweep.state import SweepState
from reb_ray.sweep.trial_identity import trial_identities
from reb_ray.orchestrators.head_watch import HEAD_LOST_EXIT, HeadWatch, driver_targets
from reb_ray.results.compact import CompactionResult, compact_if_idle
from reb_ray.results.parquet_sink import ParquetSink
from reb_ray.trial.record import TrialOutcome

log = logging.getLogger(__name__)

# (output, sweep_id, out_dir) -> (summary metrics, {plot name: PNG path})
WandbExtras = Callable[[Path, str, Path], tuple[dict, dict]]


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
    slot_workers: int = 0  # slots started (replacements included)
    slot_processes: int = 0  # their worker processes (fewer when slots share one: SlotTiming.slots_per_worker)
    node_check_s: float | None = None  # seconds the start-up node checks took (None: no node was checked)
    slot_up_s: list[float] = field(default_factory=list)  # per slot worker up: seconds from the first slot asked for
    slot_up_cpu_s: list[float] = field(default_factory=list)  # per slot worker process up: its CPU seconds until then
    reused: int = 0  # trials taken over from other sweeps' scored trials of the same identity
    reused_from: dict[str, int] = field(default_factory=dict)  # {source sweep id: trials reused from it}
    # Trials whose last attempt in this run was not scored, by failure owner (infra, hardware):
    # what the command's exit code and last line count as left undone (not retried attempts).
    unscored: dict[str, int] = field(default_factory=dict)


def _prepare_sandbox(config: SweepConfig) -> str | None:
    """Reap orphans of dead sweeps (containers whose owner process is gone) and resolve the image
    tag (a provider that runs from an image: docker).

    Raises DockerUnavailable or ImageMissing with the one-line fix, RebRayError when a rootless
    Podman service's user cannot reach a directory sandboxes mount (the wheel cache under /root).
    """
    from reb_ray.sandbox import capabilities_of

    if not capabilities_of(config.sandbox.provider).image:  # raises UnknownName for a name no provider has
        return None
    from reb_ray.sandbox import provider_class
    from reb_ray.sandbox.docker.reaper import reap

    engine = provider_class(config.sandbox.provider)  # the docker daemon, or the podman service
    client = engine.connect_engine()
    reap(client)
    if engine.engine_name == "podman":  # a rootless service's user must reach every bind source, else no sandbox starts
        from reb_ray.agents import get_agent
        from reb_ray.agents.toolchain import toolchains_root
        from reb_ray.sandbox.docker.podman_sandbox import bind_sources, check_bind_sources

        toolchains = (toolchains_root(config.sandbox.toolchains_dir)
                      if any(get_agent(config.agent_spec(a)).uses_toolchain for a in config.agents) else None)
        check_bind_sources(client, bind_sources(config.sandbox, toolchains))
    return engine.require_image(client, config.sandbox.image_profile)


def _key_names(config: SweepConfig) -> list[str]:
    """The variables of the sweep's agents that may hold secrets (their key and credential
    variables): with reb_ray.llm.keys.KNOWN_KEY_VARS, what no Ray process may inherit."""
    from reb_ray.agents import get_agent

    return [name for agent in config.agents for name in get_agent(config.agent_spec(agent)).credential_names()]


def run_sweep(config: SweepConfig, show_progress: bool = True, *, slot_start_concurrency: int | None = None,
              slots_per_worker: int | None = 1,
              wandb_extras: WandbExtras | None = None, exit_on_head_loss: bool = False) -> SweepResult:
    """Run every not-yet-scored trial of `config`; rows are written as each attempt finishes.

    `slot_start_concurrency`: slot workers started at once (None: all; a cluster simulated on
    one machine, whose raylets share its cores, starts them faster a few at a time).
    `slots_per_worker`: slots of a node sharing one worker process (None: all of a node's;
    reb_ray.orchestrators.slot_pool says what that trades).
    `wandb_extras(output, sweep_id, out_dir) -> (summary, {plot: png})`: what the W&B run's
    finish adds beyond the rows (the CLI passes analysis.wandb_extras.summary_and_plots).

    The head's death (its GCS, or the raylet the driver is attached to: `head_watch`) stops the
    sweep between two outcomes: every outcome received is written and the sink closed, one line
    naming what died goes to the sweep log, and then, with `exit_on_head_loss` (the CLI), the
    line goes to stderr and the process exits with HEAD_LOST_EXIT at once, before Ray's own fatal
    exit; without it, HeadLost is raised at the orchestrator's next turn (a caller stuck in a
    GCS call meanwhile is ended by Ray about 60 s after the GCS died)."""
    from reb_ray.orchestrators.address import probe
    from reb_ray.orchestrators.ray_orchestrator import RayOrchestrator, SlotTiming
    from reb_ray.orchestrators.session import init_ray

    if config.cluster.address:  # a wrong address fails in seconds (not after Ray's minutes), before anything is written
        probe(config.cluster.address)
    made = _check_output(config.output.dir)
    try:
        image = _prepare_sandbox(config)
        state = SweepState.read(config)  # the suite and the output directory, read once
    except BaseException:
        if made:  # a sweep stopped by its engine check or a bad suite or task pattern leaves no empty output directory
            with contextlib.suppress(OSError):
                config.output.dir.rmdir()
        raise
    specs, skipped = expand(config, image, state)
    result = SweepResult(sweep_id=state.sweep_id, skipped=skipped)
    scoring = scoring_identity(config, image, state.tasks)
    drift = check_identity(config.output.dir.resolve(), state.sweep_id, scoring, config.resume.allow_drift,
                           scored=bool(state.scored_ids))
    identities = trial_identities(specs, scoring)
    specs = _reuse(config, specs, identities, result, state)
    # This run's token: its containers' `reb-ray.run` label (another sweep of the same id may
    # run on the node into another output directory; a dead attempt's removal takes only ours).
    run_id = uuid.uuid4().hex[:16]
    specs = [spec.model_copy(update={"run_id": run_id}) for spec in specs]
    if config.llm.max_cost_usd is not None:  # what earlier runs of the sweep spent counts (a resume continues)
        result.budget = SweepBudget.from_table(config.llm.max_cost_usd, state.own_rows)
        if result.budget.reached:
            result.not_launched = len(specs)
            return result
    if not specs:
        return result
    start = time.monotonic()
    init_ray(config.cluster.address, _key_names(config), sweep_log(config, result.sweep_id))
    from reb_ray.orchestrators.node_check import NodeRequirements

    # No --max-concurrent: as many trials as the live cluster's slots hold (a node that joins adds its own).
    orchestrator = RayOrchestrator(config, docker_image=image, budget=result.budget,
                                   expected_s=estimator(medians=table_medians(state.history)),
                                   requirements=NodeRequirements.for_sweep(config, image),
                                   on_node_line=lambda line: _node_line(config, result.sweep_id, line),
                                   timing=SlotTiming(start_concurrency=slot_start_concurrency,
                                                     slots_per_worker=slots_per_worker))
    sink = ParquetSink(config.output.dir)
    wandb = _open_wandb(config, result.sweep_id)
    counts = {"running": 0, "done": 0, "failed": 0}
    # One outcome is written at a time; the head watch takes this lock to stop the sweep between two.
    recording = threading.Lock()
    stopped: list[str] = []  # the head's death, once seen: later outcomes are not written
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  # `failed`: scored trials with at least one stage the agent failed (any stage,
                  # not only C1), so the count is of trials, as the bar's total is.
                  TextColumn("running {task.fields[running]}  with a failed stage {task.fields[failed]}  "
                             "infra-retried {task.fields[infra]}"), TimeElapsedColumn(),
                  disable=not show_progress, console=_progress_console()) as progress:
        bar = progress.add_task(f"sweep {result.sweep_id}", total=len(specs), running=0, failed=0, infra=0)

        def on_start(spec: TrialSpec) -> None:
            counts["running"] += 1
            progress.update(bar, running=counts["running"])

        def on_outcome(outcome: TrialOutcome, retry: bool) -> None:
            with recording:
                if not stopped:
                    record(outcome, retry)

        def record(outcome: TrialOutcome, retry: bool) -> None:
            outcome.trial["config_drift"] = drift or None
            outcome.trial["trial_identity"] = identities.get(outcome.trial.get("trial_id"))
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
                if outcome.status != "scored":
                    owner = outcome.trial.get("failure_owner") or "infra"
                    result.unscored[owner] = result.unscored.get(owner, 0) + 1
                counts["failed"] += outcome.trial.get("failure_owner") == "agent"
            progress.update(bar, completed=counts["done"], running=counts["running"], failed=counts["failed"],
                            infra=result.infra_errors)

        def head_lost(what: str) -> None:
            line = (f"the sweep stopped: {what}; {result.attempts} attempt(s) written ({result.scored} scored), "
                    f"{counts['running']} in flight have no row and run again on resume; restart the cluster at "
                    "the same address and run the same command to resume")
            got = recording.acquire(timeout=30)  # a write in progress ends first
            try:
                stopped.append(line)
                sink.close()  # every row handed to the sink is on disk
            except Exception as exc:  # noqa: BLE001 - said in the line, which must still go out
                line += f" (the last rows could not be written: {first_line(exc)})"
            finally:
                if got:
                    recording.release()
            _log_line(config, result.sweep_id, line)
            if exit_on_head_loss:
                progress.stop()  # the bar's last state stays; the line goes below it
                print(f"error: {line}", file=sys.stderr, flush=True)
                os._exit(HEAD_LOST_EXIT)  # Ray's atexit shutdown would block on the dead head
            orchestrator.head_lost = line

        watch = HeadWatch(driver_targets(), head_lost).start()
        try:
            orchestrator.run(specs, on_outcome, on_start)
        finally:
            watch.stop()
            sink.close()  # every row on disk, the run lock released
    result.compaction = compact_if_idle(config.output.dir, result.sweep_id)  # a few files per sweep, not one per flush
    if wandb is not None:  # after Parquet is whole and compacted: the artifact holds the final files
        _finish_wandb(wandb, config, result.sweep_id, wandb_extras)
    result.not_launched = len(orchestrator.not_launched)
    result.slot_workers = orchestrator.slots_created
    result.slot_processes = orchestrator.workers_created
    result.node_check_s, result.slot_up_s = orchestrator.nodes.check_s, orchestrator.slot_up_s
    result.slot_up_cpu_s = orchestrator.slot_up_cpu_s
    result.wall_time_s = time.monotonic() - start
    return result


def _check_output(output: Path) -> bool:
    """The output directory exists or can be made, and takes a file: else RebRayError naming it,
    before any trial runs (a sweep that cannot write its rows must not start). True when this
    made the directory (nothing was in it)."""
    import tempfile

    made = not output.exists()
    try:
        output.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=output, prefix=".reb-ray-write-check-"):
            pass
    except OSError as exc:
        raise RebRayError(f"--output {output}: cannot write results there ({exc.strerror or exc})") from None
    return made


def sweep_log(config: SweepConfig, sweep_id: str) -> Path:
    """The sweep's log of cluster events (nodes that failed their check), one line each, UTC
    time first: `<output>/.reb-ray/logs/sweep-<id>.log`."""
    from reb_ray.results.layout import CONTROL_DIR, sweep_dir_name

    return config.output.dir.resolve() / CONTROL_DIR / "logs" / f"{sweep_dir_name(sweep_id)}.log"


def _node_line(config: SweepConfig, sweep_id: str, line: str) -> None:
    """A node that fails its check: one line on the terminal (stderr) and in the sweep's log."""
    print(line, file=sys.stderr, flush=True)
    log.warning("%s", line)
    _log_line(config, sweep_id, line)


def _log_line(config: SweepConfig, sweep_id: str, line: str) -> None:
    """One line in the sweep's log, UTC time first."""
    import datetime as dt

    path = sweep_log(config, sweep_id)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as f:
            f.write(f"{dt.datetime.now(dt.timezone.utc).isoformat(timespec='seconds')} {line}\n")
    except OSError as exc:
        log.warning("sweep log %s: %s", path, exc)


def _store_artifacts(config: SweepConfig, outcome: TrialOutcome) -> None:
    """Write the logs a worker shipped with the outcome (`artifacts.store`) into the output
    directory; on failure the rows stay, their artifact paths cleared and the reason noted."""
    from reb_ray.trial import artifacts

    files, outcome.artifacts = outcome.artifacts, {}
    if not files:
        return
    try:
        artifacts.store(config.output.dir.resolve(), files)
    except (OSError, ValueError) as exc:
        log.warning("trial %s: its logs could not be stored: %s", outcome.trial.get("trial_id"), exc)
        outcome.trial["failure_reason"] = (outcome.trial.get("failure_reason") or "") + f" [logs lost: {exc}]"
        for row in (outcome.trial, *outcome.stages):
            for key in artifacts.PATH_COLUMNS:
                if key in row:
                    row[key] = None


def _reuse(config: SweepConfig, specs: list[TrialSpec], identities: dict[str, str], result: SweepResult,
           state: SweepState) -> list[TrialSpec]:
    """The specs still to run once every trial that a scored trial of the same identity in the
    output directory covers is copied into the sweep (`plan_reuse`), counted in
    `result`. None is reused under `--fresh` or `--rerun` (both ask for new runs)."""
    from reb_ray.sweep.trial_identity import plan_reuse, reused_rows

    if config.resume.fresh or config.resume.rerun or not specs:
        return specs
    output = config.output.dir.resolve()
    plan = plan_reuse(output, result.sweep_id, specs, identities, state.history)
    if not plan.picks:
        return specs
    remaining, copied = [], {}
    sink = ParquetSink(config.output.dir)
    try:
        for spec in specs:
            source = plan.picks.get(spec.trial_id)
            if source is None:
                remaining.append(spec)
                continue
            try:
                trial, stages = reused_rows(output, spec, source)
            except LookupError as exc:  # compacted away meanwhile: run it
                log.warning("trial %s: not reused: %s", spec.trial_id, exc)
                remaining.append(spec)
                continue
            trial["trial_identity"] = identities[spec.trial_id]
            sink.write([trial], stages)
            copied[source[0]] = copied.get(source[0], 0) + 1
    finally:
        sink.close()
    result.reused = sum(copied.values())
    result.reused_from = dict(sorted(copied.items(), key=lambda kv: (-kv[1], kv[0])))
    return remaining


def _open_wandb(config: SweepConfig, sweep_id: str):
    """The sweep's W&B run (`WandbLog`), or None without --wandb. Raises RebRayError
    when the `wandb` extra is not installed (before any trial runs)."""
    if not config.output.wandb_project:
        return None
    try:
        import wandb  # noqa: F401
    except ImportError:
        raise RebRayError("--wandb: the wandb package is not installed (pip install 'reb-ray[wandb]')") from None
    from reb_ray.results.schema import STAGES_SCHEMA, TRIALS_SCHEMA
    from reb_ray.sweep.wandb_log import WandbLog

    return WandbLog(config.output.wandb_project, config.output.dir.resolve(), sweep_id,
                    config.model_dump(mode="json"), TRIALS_SCHEMA.names, STAGES_SCHEMA.names)


def _finish_wandb(wandb, config: SweepConfig, sweep_id: str, extras: WandbExtras | None) -> None:
    """Summary metrics per agent and the analysis plots, as `extras` computes them in a
    temporary directory that outlives the bounded finish (none without `extras`), and the
    Parquet datasets."""
    import tempfile

    output = config.output.dir.resolve()
    with tempfile.TemporaryDirectory(prefix="reb-ray-wandb-plots-") as tmp:
        summary, plots = extras(config.output.dir, sweep_id, Path(tmp)) if extras is not None else ({}, {})
        wandb.finish(summary, plots=plots, datasets=[output / "trials", output / "stages"], timeout_s=config.output.wandb_timeout_s)


def _progress_console():
    """The terminal's console; into a file or a pipe, one 160 columns wide, so the final
    progress line is not cut at rich's 80-column default there."""
    from rich.console import Console

    console = Console()
    return console if console.is_terminal else Console(width=160)
