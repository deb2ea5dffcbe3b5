"""`reb-ray sweep`: agents x tasks x trials on Ray; results as Parquet under --output."""

from __future__ import annotations

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib
import difflib
from pathlib import Path
from typing import Optional

import typer
from pydantic import ValidationError

from reb_ray.errors import RebRayError
from reb_ray.models.agent import AgentSpec
from reb_ray.models.sweep import SweepConfig


# Config keys whose command-line flag is spelled differently.
_FLAG_NAMES = {"agent_timeout_s": "--agent-timeout", "repo_mirrors": "--repo-mirror", "wheelhouses": "--wheelhouse",
               "assets_dir": "--assets", "pip_cache": "--no-pip-cache", "shm_size_bytes": "--shm-size-gb",
               "prices_file": "--prices", "memory_bytes": "--memory-gb", "disk_quota_bytes": "--disk-quota-gb",
               "env_disk_budget_bytes": "--env-disk-budget-gb"}


def load_config(path: Path | None, overrides: dict) -> SweepConfig:
    """Values from `--config` TOML, then flags (non-None `overrides`) on top.

    Raises RebRayError with one line naming the file, field and bad value.
    """
    data: dict = {}
    if path is not None:
        try:
            data = tomllib.loads(path.read_text())
        except OSError as exc:
            raise RebRayError(f"{path}: cannot read the config file ({exc.strerror})") from None
        except tomllib.TOMLDecodeError as exc:
            hint = ("; with [agents.NAME] tables leave out `agents = [...]`: the tables are the agents, in order "
                    "(pick among them with --agents)") if "('agents'" in str(exc) else ""
            raise RebRayError(f"{path}: not valid TOML ({exc}){hint}") from None
    if isinstance(data.get("agents"), dict):  # [agents.NAME] tables: the specs, in the file's order
        data["agent_specs"] = {**data.get("agent_specs", {}), **data["agents"]}
        data["agents"] = list(data["agents"])
    data.update({k: v for k, v in overrides.items() if v is not None})
    if isinstance(data.get("agents"), str):  # the same comma-separated form as --agents
        data["agents"] = [a.strip() for a in data["agents"].split(",") if a.strip()]
    try:
        return SweepConfig.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = [str(p) for p in err["loc"]] or [""]
        if path is None or overrides.get(loc[0]) is not None:  # the value came from a flag
            where, field = "flags", _FLAG_NAMES.get(loc[0], "--" + loc[0].replace("_", "-"))
        else:  # the file's [agents.NAME] tables are SweepConfig.agent_specs
            where, field = str(path), ".".join(["agents" if loc[0] == "agent_specs" else loc[0], *loc[1:]])
        if err["type"] == "extra_forbidden":
            model = AgentSpec if loc[0] == "agent_specs" else SweepConfig
            close = difflib.get_close_matches(loc[-1], model.model_fields, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; valid keys: {', '.join(model.model_fields)}"
            raise RebRayError(f"{where}: unknown key {field!r}{hint}") from None
        raise RebRayError(f"{where}: {field} = {err.get('input')!r}: {err['msg']}") from None


def sweep(
    suite: Optional[str] = typer.Option(None, help="Suite of tasks (default demo)."),
    tasks: Optional[str] = typer.Option(None, help="Pattern(s) on task ids, comma-separated, e.g. 'numpy-*'."),
    tasks_root: Optional[Path] = typer.Option(None, help="Directory holding suites (default: the bundled tasks/)."),
    agents: Optional[str] = typer.Option(None, help="Comma-separated agents: names of \\[agents.NAME] tables, or kind, kind@model, package.module:Class (default heuristic,noop)."),
    trials: Optional[int] = typer.Option(None, help="Repeats per agent and task."),
    output: Optional[Path] = typer.Option(None, help="Output directory for Parquet datasets (default ./reb-runs)."),
    address: Optional[str] = typer.Option(None, help="Ray cluster address to join (default: start a local Ray)."),
    max_concurrent: Optional[int] = typer.Option(None, help="Trials running at once (default: cluster CPUs)."),
    cpus_per_trial: Optional[float] = typer.Option(None, help="CPU cores reserved per trial in Ray and given to its sandbox (default 1)."),
    repo_mirror: Optional[list[Path]] = typer.Option(None, help="Local mirror directory of repositories (repeatable)."),
    wheelhouse: Optional[list[Path]] = typer.Option(None, help="Wheel directory visible to sandboxes as find-links (repeatable)."),
    sandbox: Optional[str] = typer.Option(None, help="docker | podman (rootful or rootless; socket from REB_RAY_PODMAN_SOCKET) | local | sleep (scripted sleeps for scheduling benchmarks: REB_RAY_SLEEP_SCRIPT)."),
    assets: Optional[Path] = typer.Option(None, "--assets", help="Read-only asset cache for the probes (see `reb-ray assets fetch`)."),
    skip_missing_assets: bool = typer.Option(False, "--skip-missing-assets", help="Run trials whose assets are missing: the stages that need them are not_run, the rest is scored."),
    unsafe_local: bool = typer.Option(False, "--unsafe-local", help="Allow non-built-in agents in a sandbox without a guarded network of its own (local, podman)."),
    no_pip_cache: bool = typer.Option(False, "--no-pip-cache", help="Do not share the per-node pip cache with sandboxes."),
    shm_size_gb: Optional[float] = typer.Option(None, help="/dev/shm of each sandbox in GiB (default 16; Docker's own 64 MB breaks DataLoader and NCCL)."),
    memory_gb: Optional[float] = typer.Option(None, help="Memory limit of each sandbox in GiB (default: the node's memory x 0.8 / its trial slots); an OOM kill is the agent's `oom`."),
    pids_limit: Optional[int] = typer.Option(None, help="Processes and threads per sandbox (default 4096); a fork bomb at it is the agent's `pids_limit`."),
    disk_quota_gb: Optional[float] = typer.Option(None, help="Writable-layer size per sandbox in GiB, watched during the agent phase (default 50); past it the agent is stopped: `disk_quota`."),
    network_policy: Optional[str] = typer.Option(None, "--network-policy", help="Sandbox egress: open (default) | registries: only package registries (`network_allow` in --config) and the node's LLM proxy, through an allow-listing proxy; refused connections are logged and counted (network_denied_count)."),
    share_gpus_in_agent_phase: bool = typer.Option(False, "--share-gpus-in-agent-phase", help="Agent phases run on CPU slots of GPU nodes and see GPUs without holding them; each probe phase then holds its node's GPUs exclusively (docker: the agent's container is committed to a per-attempt image; C1 runs with no GPU device)."),
    max_attempts: Optional[int] = typer.Option(None, help="Attempts per trial in this run when infrastructure fails (default 2)."),
    agent_timeout: Optional[float] = typer.Option(None, help="Agent phase limit in seconds."),
    toolchains_dir: Optional[Path] = typer.Option(None, help="Agent toolchains directory (default ~/.cache/reb-ray/toolchains; see `reb-ray agents install`)."),
    max_cost_usd: Optional[float] = typer.Option(None, "--max-cost-usd", help="Sweep budget in USD: launch no new trial once the cost recorded in the sweep's rows reaches it (a resume counts what was spent)."),
    prices: Optional[Path] = typer.Option(None, "--prices", help="A price table over the shipped one (see `reb-ray llm prices`); a path on every node."),
    wandb: Optional[str] = typer.Option(None, "--wandb", help="Also log rows to this W&B project from the driver (needs the `wandb` extra; offline when no key is configured). Parquet is written first; a slow W&B is abandoned after --wandb-timeout seconds."),
    wandb_timeout: Optional[float] = typer.Option(None, "--wandb-timeout", help="Seconds the sweep waits for W&B to finish (default 60)."),
    sweep_id: Optional[str] = typer.Option(None, help="Sweep id (default: derived from suite, tasks, agents, trials)."),
    rerun: bool = typer.Option(False, "--rerun", help="Run trials again even if already scored."),
    fresh: bool = typer.Option(False, "--fresh", help="Reuse no scored trial of another sweep in --output (by default a trial whose identity, i.e. agent, model, arguments, CLI version, task spec, probes, image, limits and trial index, matches one already scored is taken over, not run)."),
    allow_drift: bool = typer.Option(False, "--allow-drift", help="Resume although scoring settings (agent model or CLI version, task specs, probes, image, timeouts, limits) changed since the sweep's first run; the changed fields are recorded in `config_drift`."),
    keep_environments: Optional[str] = typer.Option(None, "--keep-environments", help="Which attempts keep the agent's container as an image on their node: none, successes (default: a command stage C1/C3/C4 passed), scored, all (`reb-ray env export` takes them away; --env-disk-budget-gb bounds them)."),
    env_disk_budget_gb: Optional[float] = typer.Option(None, "--env-disk-budget-gb", help="Per-node disk budget for kept environments in GiB (their own layers, all sweeps together); after each kept commit the oldest are removed until the rest fits (default 50, or half the Docker disk's free space when less; `reb-ray env gc` applies it by hand)."),
    verify_exports: bool = typer.Option(False, "--verify-exports", help="After the sweep, export each success (a C1/C3/C4 stage passed) not verified before and rebuild it in a fresh sandbox to verify it (`reb-ray env verify`): `reproducible: yes|no|not attempted` per trial, into <output>/environments/verifications.jsonl and `trial show`."),
    config: Optional[Path] = typer.Option(None, "--config", help="sweep.toml with defaults; flags override it."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
) -> None:
    """Run a sweep: every agent on every task, `--trials` times, each trial in its own sandbox."""
    from analysis.summary import format_summary, summarize
    from analysis.wandb_extras import summary_and_plots
    from reb_ray.results.read import read_trials
    from reb_ray.sweep.run import run_sweep

    overrides = {
        "suite": suite, "tasks": tasks, "tasks_root": tasks_root, "agents": None if agents is None else [a.strip() for a in agents.split(",") if a.strip()], "trials": trials,
        "output": output, "address": address, "max_concurrent": max_concurrent, "cpus_per_trial": cpus_per_trial, "repo_mirrors": repo_mirror or None,
        "wheelhouses": wheelhouse or None, "sandbox": sandbox, "assets_dir": assets, "skip_missing_assets": skip_missing_assets or None, "unsafe_local": unsafe_local or None,
        "pip_cache": False if no_pip_cache else None, "agent_timeout_s": agent_timeout, "max_attempts": max_attempts,
        "shm_size_bytes": int(shm_size_gb * 1024**3) if shm_size_gb else None, "sweep_id": sweep_id,
        "memory_bytes": None if memory_gb is None else int(memory_gb * 1024**3), "pids_limit": pids_limit,
        "disk_quota_bytes": None if disk_quota_gb is None else int(disk_quota_gb * 1024**3),
        "network_policy": network_policy, "rerun": rerun or None, "fresh": fresh or None, "toolchains_dir": toolchains_dir, "max_cost_usd": max_cost_usd, "prices_file": prices,
        "wandb_project": wandb, "wandb_timeout_s": wandb_timeout, "allow_drift": allow_drift or None,
        "share_gpus_in_agent_phase": share_gpus_in_agent_phase or None,
        "keep_environments": keep_environments,  # environment artifacts
        "verify_exports": verify_exports or None,
        "env_disk_budget_bytes": None if env_disk_budget_gb is None else int(env_disk_budget_gb * 1024**3),
    }
    cfg = load_config(config, overrides)
    from reb_ray.trial.egress import unguarded_warning

    if (warning := unguarded_warning(cfg)) is not None:  # an explicit `network`: the user's choice, never silent
        typer.echo(warning, err=True)
    from reb_ray.sandbox import capabilities_of, provider_class

    if capabilities_of(cfg.sandbox).image:  # what this node's engine will not do (podman: limits, host guard)
        for line in provider_class(cfg.sandbox).start_warnings():
            typer.echo(line, err=True)
    result = run_sweep(cfg, show_progress=not quiet, wandb_extras=summary_and_plots, exit_on_head_loss=True)
    typer.echo(f"sweep {result.sweep_id}: {result.attempts} attempt(s) run, {result.skipped} already scored, "
               f"{result.infra_errors} infra error(s), {result.wall_time_s:.1f} s; results in {cfg.output}")
    if result.reused:
        sources = ", ".join(f"{sweep} ({n})" for sweep, n in result.reused_from.items())
        typer.echo(f"reused {result.reused} scored trial(s) of the same identity from sweep(s) {sources}; --fresh runs them again")
    if result.budget is not None:
        stop = (f"; budget reached: {result.not_launched} trial(s) not launched (run again with a larger "
                "--max-cost-usd to continue)" if result.not_launched else "")
        typer.echo(f"cost: {result.budget.describe()}{stop}")
    trials = read_trials(cfg.output, result.sweep_id)
    typer.echo(format_summary(summarize(trials), trials))
    if cfg.verify_exports:
        _verify_exports(cfg, result.sweep_id)


def _verify_exports(cfg: SweepConfig, sweep_id: str) -> None:
    """--verify-exports: one line per success as its verification ends, then the counts."""
    from reb_ray.sweep.verify_exports import verify_exports

    typer.echo("verifying the exports of this sweep's successes (rebuilt with --no-cache) ...")
    records = verify_exports(cfg.output, sweep_id, cfg.tasks_root, cfg.repo_mirrors, progress=typer.echo)
    counts = {"yes": sum(r.get("reproducible") is True for r in records),
              "no": sum(r.get("reproducible") is False for r in records),
              "not attempted": sum(r.get("reproducible") is None for r in records)}
    typer.echo(f"exports verified: {len(records)} new; reproducible " + ", ".join(f"{k} {v}" for k, v in counts.items())
               + f"; records in {cfg.output / 'environments' / 'verifications.jsonl'}")
