"""`reb-ray sweep`: agents x tasks x trials on Ray; results as Parquet under --output."""

from __future__ import annotations

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib
import difflib
import inspect
from pathlib import Path
from typing import Any, Callable, Optional

from typing import TYPE_CHECKING

import typer

from reb_ray.errors import RebRayError

if TYPE_CHECKING:  # imported where used: `reb-ray --help` loads no pydantic model (reb_ray.cli)
    from reb_ray.models.sweep import SweepConfig


GiB = 1024**3


def _gib(value: float | None) -> int | None:
    return None if value is None else int(value * GiB)


def _switch(value: bool) -> bool | None:
    """An on-switch flag: True when given, else unset (None), so a config file's value stands."""
    return True if value else None


#: `reb-ray sweep` options that set a setting: option parameter -> (SweepConfig field path,
#: conversion of the option's value; a None result leaves the setting to the file or the default).
#: The `sweep` command builds its overrides from this table alone; tests check that every path
#: exists in the model and every option that is not `--config`/`--quiet` is here.
OPTION_FIELDS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "suite": ("suite", lambda v: v),
    "tasks": ("tasks", lambda v: v),
    "tasks_root": ("tasks_root", lambda v: v),
    "agents": ("agents", lambda v: None if v is None else [a.strip() for a in v.split(",") if a.strip()]),
    "trials": ("trials", lambda v: v),
    "output": ("output.dir", lambda v: v),
    "address": ("cluster.address", lambda v: v),
    "max_concurrent": ("cluster.max_concurrent", lambda v: v),
    "cpus_per_trial": ("sandbox.cpus_per_trial", lambda v: v),
    "repo_mirror": ("repo_mirrors", lambda v: v or None),
    "wheelhouse": ("sandbox.wheelhouses", lambda v: v or None),
    "sandbox": ("sandbox.provider", lambda v: v),
    "assets": ("assets_dir", lambda v: v),
    "skip_missing_assets": ("skip_missing_assets", _switch),
    "unsafe_local": ("sandbox.unsafe_local", _switch),
    "no_pip_cache": ("sandbox.pip_cache", lambda v: False if v else None),
    "shm_size_gb": ("sandbox.shm_size_bytes", lambda v: int(v * GiB) if v else None),
    "memory_gb": ("sandbox.memory_bytes", _gib),
    "pids_limit": ("sandbox.pids_limit", lambda v: v),
    "disk_quota_gb": ("sandbox.disk_quota_bytes", _gib),
    "network_policy": ("network.policy", lambda v: v),
    "share_gpus_in_agent_phase": ("cluster.share_gpus_in_agent_phase", _switch),
    "max_attempts": ("max_attempts", lambda v: v),
    "agent_timeout": ("agent_timeout_s", lambda v: v),
    "toolchains_dir": ("sandbox.toolchains_dir", lambda v: v),
    "max_cost_usd": ("llm.max_cost_usd", lambda v: v),
    "prices": ("llm.prices_file", lambda v: v),
    "wandb": ("output.wandb_project", lambda v: v),
    "wandb_timeout": ("output.wandb_timeout_s", lambda v: v),
    "sweep_id": ("resume.sweep_id", lambda v: v),
    "rerun": ("resume.rerun", _switch),
    "fresh": ("resume.fresh", _switch),
    "allow_drift": ("resume.allow_drift", _switch),
    "keep_environments": ("output.keep_environments", lambda v: v),
    "env_disk_budget_gb": ("output.env_disk_budget_bytes", _gib),
    "verify_exports": ("output.verify_exports", _switch),
    "image_map": ("sandbox.image_map", lambda v: _image_map(v) or None),
}


def _image_map(pairs: list[str] | None) -> dict[str, str]:
    """`--image-map` values as a mapping; a value without `=` is a usage error naming it."""
    from reb_ray.harbor.images import parse_image_map

    try:
        return parse_image_map(pairs or [])
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--image-map") from None


def option_flag(param: str) -> str:
    """The command-line spelling of `sweep`'s option parameter `param` (its first long flag)."""
    default = inspect.signature(sweep).parameters[param].default
    decls = [d for d in getattr(default, "param_decls", ()) if d.startswith("--")]
    return decls[0] if decls else "--" + param.replace("_", "-")


def _path(key: str) -> str:
    """A settings key as a field path: a flat-form key (`memory_bytes`) as its section's
    (`sandbox.memory_bytes`), a path or top-level field as given."""
    from reb_ray.models.sweep import FLAT_KEYS

    section_field = FLAT_KEYS.get(key)
    return ".".join(section_field) if section_field and "." not in key else key


def _set(data: dict, path: str, value) -> None:
    head, _, rest = path.partition(".")
    if rest:
        table = data.setdefault(head, {})
        if isinstance(table, dict):  # else the file's value where a section belongs: validation names it
            _set(table, rest, value)
    else:
        data[head] = value


def load_config(path: Path | None, overrides: dict) -> SweepConfig:
    """Values from `--config` TOML (sectioned or the flat form), then `overrides` on top: field
    paths (`sandbox.memory_bytes`) or flat-form keys (`memory_bytes`) to values, None meaning
    unset (the `sweep` command's come from OPTION_FIELDS).

    Raises RebRayError with one line naming the file (or the flag), field and bad value.
    """
    from pydantic import ValidationError

    from reb_ray.models.sweep import FLAT_KEYS, SweepConfig, is_flat, sectioned

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
    if isinstance(data.get("agents"), str):  # the same comma-separated form as --agents
        data["agents"] = [a.strip() for a in data["agents"].split(",") if a.strip()]
    # The file's keys as written, by field path: errors name a setting the way the file does.
    written = {".".join(FLAT_KEYS[k]): k for k, v in data.items() if is_flat(k, v)}
    try:
        data = sectioned(data)
    except ValueError as exc:
        raise RebRayError(f"{path}: {exc}") from None
    flags = {_path(k): v for k, v in overrides.items() if v is not None}
    if isinstance(flags.get("agents"), str):
        flags["agents"] = [a.strip() for a in flags["agents"].split(",") if a.strip()]
    for field, value in flags.items():
        _set(data, field, value)
    try:
        return SweepConfig.model_validate(data)
    except ValidationError as exc:
        raise RebRayError(_one_line(exc.errors()[0], path, flags, written)) from None


def _one_line(err, path: Path | None, flags: dict, written: dict[str, str]) -> str:
    """The first validation error as one line: where the value came from (`flags` or the file),
    the field as the user spelled it, the value and what is wrong."""
    from reb_ray.models.agent import AgentSpec
    from reb_ray.models.sweep import FLAT_KEYS, SECTIONS, SweepConfig
    ctx = err.get("ctx") or {}
    loc = [str(p) for p in err["loc"]]
    if "field" in ctx:  # a check across sections names its field itself
        loc, value = ctx["field"].split("."), ctx.get("value")
    else:
        value = err.get("input")
    field = ".".join(loc[:2]) if loc and loc[0] in SECTIONS else (loc[0] if loc else "")
    if path is None or field in flags:  # the value came from a flag
        option = next((o for o, (f, _) in OPTION_FIELDS.items() if f == field), None)
        where, name = "flags", option_flag(option) if option else "--" + (loc[-1] if loc else "").replace("_", "-")
    else:  # the file's [agents.NAME] tables are SweepConfig.agent_specs
        where = str(path)
        name = written.get(field) or ".".join(["agents" if loc and loc[0] == "agent_specs" else (loc[0] if loc else ""),
                                               *loc[1:]])
    if err["type"] == "extra_forbidden":
        if loc and loc[0] == "agent_specs":
            choices = list(AgentSpec.model_fields)
        elif len(loc) > 1 and loc[0] in SECTIONS:
            choices = list(SECTIONS[loc[0]].model_fields)
        else:
            choices = [*SweepConfig.model_fields, *FLAT_KEYS]
        close = difflib.get_close_matches(loc[-1], choices, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f"; valid keys: {', '.join(dict.fromkeys(choices))}"
        return f"{where}: unknown key {name!r}{hint}"
    if not loc:  # a check of the whole configuration (a setting given twice)
        return f"{where}: {err['msg']}"
    return f"{where}: {name} = {value!r}: {err['msg']}"


def sweep(
    suite: Optional[str] = typer.Option(None, help="Suite of tasks (default demo): a directory of --tasks-root (`reb-ray tasks list` shows them) or harbor:PATH (Harbor tasks)."),
    tasks: Optional[str] = typer.Option(None, help="Pattern(s) on task ids, comma-separated, e.g. 'numpy-*'."),
    tasks_root: Optional[Path] = typer.Option(None, help="Directory holding suites (default: the bundled tasks/)."),
    agents: Optional[str] = typer.Option(None, help="Comma-separated agents: names of [agents.NAME] tables, or kind, kind@model, package.module:Class (default heuristic,noop)."),
    trials: Optional[int] = typer.Option(None, help="Repeats per agent and task (default 1)."),
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
    agent_timeout: Optional[float] = typer.Option(None, help="Agent phase limit in seconds (default 1800)."),
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
    verify_exports: bool = typer.Option(False, "--verify-exports", help="After the sweep, export each success (a C1/C3/C4 stage passed) not verified before and rebuild it in a fresh sandbox to verify it (`reb-ray env verify`), on the node that built it (with --address; else this host's only): `reproducible: yes|no|not attempted` per trial, into <output>/environments/verifications.jsonl and `trial show`."),
    image_map: Optional[list[str]] = typer.Option(None, "--image-map", help="Harbor tasks: FROM-IMAGE=LOCAL-IMAGE, or REGISTRY/=MIRROR/ (repeatable): what a Dockerfile's base image is built from here (a node that cannot reach the registry)."),
    config: Optional[Path] = typer.Option(None, "--config", help="sweep.toml with defaults; flags override it."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
) -> None:
    """Run a sweep: every agent on every task, `--trials` times, each trial in its own sandbox."""
    options = dict(locals())  # the options' values, taken before any other local exists
    from analysis.summary import format_summary, summarize
    from analysis.wandb_extras import summary_and_plots
    from reb_ray.results.read import read_trials
    from reb_ray.sweep.run import run_sweep

    overrides = {field: convert(options[name]) for name, (field, convert) in OPTION_FIELDS.items()}
    cfg = load_config(config, overrides)
    from reb_ray.trial.egress import unguarded_warning

    if (warning := unguarded_warning(cfg)) is not None:  # an explicit `network`: the user's choice, never silent
        typer.echo(warning, err=True)
    from reb_ray.sandbox import capabilities_of, provider_class

    if capabilities_of(cfg.sandbox.provider).image:  # what this node's engine will not do (podman: limits, host guard)
        for line in provider_class(cfg.sandbox.provider).start_warnings():
            typer.echo(line, err=True)
    result = run_sweep(cfg, show_progress=not quiet, wandb_extras=summary_and_plots, exit_on_head_loss=True)
    typer.echo(f"sweep {result.sweep_id}: {result.attempts} attempt(s) run, {result.skipped} already scored, "
               f"{result.infra_errors} infra error(s), {result.wall_time_s:.1f} s; results in {cfg.output.dir}")
    if result.reused:
        sources = ", ".join(f"{sweep} ({n})" for sweep, n in result.reused_from.items())
        typer.echo(f"reused {result.reused} scored trial(s) of the same identity from sweep(s) {sources}; --fresh runs them again")
    if result.budget is not None:
        stop = (f"; budget reached: {result.not_launched} trial(s) not launched (run again with a larger "
                "--max-cost-usd to continue)" if result.not_launched else "")
        typer.echo(f"cost: {result.budget.describe()}{stop}")
    trials = read_trials(cfg.output.dir, result.sweep_id)
    from analysis.rewards import format_rewards, harbor_rows, reward_summary

    if harbor_rows(trials).num_rows:  # a Harbor sweep: the reward table (C0..C5 do not apply)
        typer.echo(format_rewards(reward_summary(trials)))
    else:
        typer.echo(format_summary(summarize(trials), trials))
    example = trials["trial_id"][0].as_py() if trials.num_rows else "AGENT/TASK/0"
    typer.echo(next_line(cfg.output.dir, result.sweep_id, example))
    not_verified = _verify_exports(cfg, result.sweep_id) if cfg.output.verify_exports else 0
    code, last = sweep_exit(result, not_verified)
    if last is not None:
        typer.echo(last)
    if code:
        raise typer.Exit(code)


def next_line(output: Path, sweep_id: str, example: str) -> str:
    """The sweep's closing line: the commands that show its results, each one that runs as
    printed. `trial show` names the sweep (`--sweep-id`) when `output` holds other sweeps too:
    a trial id found in several sweeps (a reused trial is copied into each) is refused without it."""
    from reb_ray.sweep.identity import identity_path

    sweeps_dir = identity_path(output, sweep_id).parent.parent
    others = sweeps_dir.is_dir() and any(p.is_dir() and p.name != sweep_id for p in sweeps_dir.iterdir())
    choose = f" --sweep-id {sweep_id}" if others else ""
    return (f"next: `reb-ray report {output}` (the analysis), `reb-ray trial show {output} {example}{choose}` "
            f"(one trial), `reb-ray view {output}` (a local web viewer)")


def sweep_exit(result, not_verified: int = 0) -> tuple[int, str | None]:
    """The sweep's exit code and last line (reb_ray.cli.exits): INCOMPLETE when a trial's last
    attempt in this run was not scored (an infrastructure or hardware error), a trial was not
    launched because the budget was reached, or a success's export could not be verified; OK
    otherwise. A retried attempt that then scored leaves nothing undone."""
    from reb_ray.cli.exits import exit_code, incomplete_line

    undone = {"infrastructure error": result.unscored.get("infra", 0),
              "hardware error": result.unscored.get("hardware", 0),
              "other error": sum(n for owner, n in result.unscored.items() if owner not in ("infra", "hardware")),
              "not launched: budget reached": result.not_launched,
              "export not verified": not_verified}
    return exit_code(undone=sum(undone.values())), incomplete_line(undone)


def _verify_exports(cfg: SweepConfig, sweep_id: str) -> int:
    """--verify-exports: one line per success as its verification ends, then the counts;
    returns how many were not attempted (left undone).

    A sweep on a cluster (`--address`) built its successes on several nodes, and each is
    exported and verified on its own node (its wheels, its hardware): the sweep's cluster is
    handed over as a NodeRunner (joined again when no trial ran and the sweep never joined it).
    A sweep on a Ray of its own ran on this host only. When the cluster does not answer any more,
    one line says so and only this host's successes are verified; the others are recorded as
    not attempted, naming their nodes."""
    from reb_ray.sweep.verify_exports import verify_exports

    run_on = None
    if cfg.cluster.address:
        from reb_ray.orchestrators.on_node import NodeRunner

        try:
            run_on = NodeRunner(cfg.cluster.address)
        except Exception as exc:  # noqa: BLE001 - the cluster gone after the sweep: this host's successes still verify
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            typer.echo(f"the cluster at {cfg.cluster.address} does not answer ({first}): only this host's successes "
                       "are verified", err=True)
    typer.echo("verifying the exports of this sweep's successes (rebuilt with --no-cache) ...")
    records = verify_exports(cfg.output.dir, sweep_id, cfg.tasks_root, cfg.repo_mirrors, progress=typer.echo,
                             run_on=run_on)
    counts = {"yes": sum(r.get("reproducible") is True for r in records),
              "no": sum(r.get("reproducible") is False for r in records),
              "not attempted": sum(r.get("reproducible") is None for r in records)}
    typer.echo(f"exports verified: {len(records)} new; reproducible " + ", ".join(f"{k} {v}" for k, v in counts.items())
               + f"; records in {cfg.output.dir / 'environments' / 'verifications.jsonl'}")
    return counts["not attempted"]
