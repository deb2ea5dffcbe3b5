"""The life of one trial attempt (docs/architecture.md, "The life of a trial"), with no Ray in sight.

`run_trial(spec, gpus)` checks the node, places the repository, puts a docker sandbox on
reb-ray's network for its policy behind the host guard, and a `registries` one behind its own
allow-listing egress proxy too (`TrialEgress`), registers an LLM agent with
the node's metering proxy, runs the agent phase, reads the trial's meter, stops what the agent
left running and records whether it modified tracked files, runs the hidden probes
(`run_probe_phase`), and returns one `trials` row plus its `stages` rows with the agent's
credentials masked. In a sweep that shares GPUs in the agent phase (a `gpu_lease` is given), the
agent sees GPUs it does not hold and the probe phase runs in sandboxes of its own, with GPUs it
leases exclusively (`PhaseSplit`). It always returns: infrastructure failures become an `infra_error` row
(retried by the orchestrator; an agent that failed because of its LLM endpoint is one,
`TrialLlm.judge`), agent failures a `scored` row. The sandbox and the host
workspace are removed on every path.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import requests

from reb_ray.agents import REPORT_PATH, Agent, AgentContext, get_agent
from reb_ray.agents.base import AgentRun
from reb_ray.agents.prompt import render_prompt
from reb_ray.agents.toolchain_mount import NoSlot, toolchain_slot
from reb_ray.trial import artifacts
from reb_ray.trial.artifacts import TrialArtifacts
from reb_ray.suite.assets import missing_by_stage
from reb_ray.trial.between_phases import settle
from reb_ray.environment.fingerprint import fingerprint  # environment artifacts
from reb_ray.environment.phase import EnvironmentPhase  # environment artifacts
from reb_ray.errors import InfraError, RebRayError
from reb_ray.trial.gpu_lease import GpuLease
from reb_ray.grading.startup import trajectory_hits
from reb_ray.grading.unmeasured import PROBE_STAGES, agent_failed
from reb_ray.trial.llm import ProxyClient, TrialLlm
from reb_ray.llm.transcript import commands
from reb_ray.models.report import MAX_REPORT_BYTES, Report, parse_report
from reb_ray.models.sweep import TrialSpec
from reb_ray.trial.egress import TrialEgress, harness_network
from reb_ray.suite.placement import place_repo
from reb_ray.trial.probe_phase import ASSETS_MOUNT, run_probe_phase
from reb_ray.trial.phase_split import PhaseSplit
from reb_ray.redact import Redactor
from reb_ray.trial.repo_restore import restore_pinned, unchanged_by_agent
from reb_ray.trial.repo_state import changed_since, tracked_state
from reb_ray.sandbox import ExecResult, Sandbox, SandboxConfig, UnreadableFile, capabilities_of, open_sandbox
from reb_ray.sandbox import package_cache
from reb_ray.sandbox.limits import default_memory_bytes, limit_setting, watch_limits
from reb_ray.sandbox.output import DEFAULT_HEAD_BYTES
from reb_ray.sandbox.tap import TappedSandbox
from reb_ray.trial.record import TrialOutcome, TrialRecorder

WHEELHOUSE_MOUNT = "/opt/reb-ray/wheelhouse"
LEFTOVERS_KEPT, LEFTOVER_CHARS = 20, 200  # bounds of `leftover_commands` in the trials row
PIP_CACHE_MOUNT = package_cache.CACHE_MOUNT

__all__ = ["TrialOutcome", "run_trial"]


def _sandbox_config(spec: TrialSpec, gpus: list[str]) -> tuple[SandboxConfig, dict[str, str]]:
    """The sandbox config and the agent's pip environment (find-links and cache)."""
    cfg = spec.config
    docker = capabilities_of(cfg.sandbox).mounts  # mounts, limits and CA bundle: the container provider
    mounts = {str(w): f"{WHEELHOUSE_MOUNT}/{i}" for i, w in enumerate(cfg.wheelhouses)} if docker else {}
    if docker and cfg.assets_dir is not None:
        # Mounted from the start (Docker cannot add a mount later); read-only, and only the
        # probe phase gets the variables that point at it.
        mounts[str(cfg.assets_dir)] = ASSETS_MOUNT
    pip_env: dict[str, str] = {}
    find_links = [mounts[str(w)] for w in cfg.wheelhouses] if docker else [str(w) for w in cfg.wheelhouses]
    if cfg.pip_cache:
        # The node's wheel cache: read-only find-links, filled by the harness after trials
        # (`package_cache.fill`); each trial's own ~/.cache/pip dies with it.
        cfg.pip_cache_dir.mkdir(parents=True, exist_ok=True)
        if docker:
            mounts[str(cfg.pip_cache_dir)] = PIP_CACHE_MOUNT
        find_links.append(PIP_CACHE_MOUNT if docker else str(cfg.pip_cache_dir))
    else:
        pip_env["PIP_NO_CACHE_DIR"] = "1"
    if find_links:
        pip_env["PIP_FIND_LINKS"] = " ".join(find_links)
    memory = cfg.memory_bytes or default_memory_bytes(cfg.cpus_per_trial, cfg.max_concurrent)
    config = SandboxConfig(
        image=spec.image, gpus=gpus, cpus=cfg.cpus_per_trial if docker else None, memory_bytes=memory if docker else None,
        pids_limit=cfg.pids_limit if docker else None, disk_quota_bytes=cfg.disk_quota_bytes if docker else None,
        shm_size_bytes=cfg.shm_size_bytes, network=harness_network(cfg), ca_bundle=cfg.ca_bundle if docker else None,
        mounts=mounts, sweep_id=spec.sweep_id, trial_id=spec.trial_id, attempt=spec.attempt,
    )
    return config, pip_env


def _preflight(spec: TrialSpec) -> None:
    """Fail fast, before any agent time is spent, on what the node lacks (all infra).

    A missing asset that an applicable stage needs fails the attempt here (infra_assets_missing,
    naming the asset and its stages) unless the sweep runs with --skip-missing-assets: then the
    probe phase leaves only those stages not_run and the rest is measured and scored.
    """
    if capabilities_of(spec.config.sandbox).image:  # a restarting daemon: the attempt waits for it, bounded, not fails
        from reb_ray.sandbox import provider_class

        provider_class(spec.config.sandbox).wait_for_engine()  # type: ignore[attr-defined]
    free = shutil.disk_usage(tempfile.gettempdir()).free
    if free < spec.config.min_free_bytes:  # a full disk is infra (owner: infra), found before the agent runs
        raise InfraError("infra_disk_full", f"{free / 1e9:.1f} GB free, need {spec.config.min_free_bytes / 1e9:.1f} GB")
    missing = missing_by_stage(spec.task, spec.config.assets_dir)
    if missing and not spec.config.skip_missing_assets:
        first = next(iter(missing.values()))[0]
        stages = [stage for stage, assets in missing.items() if first in assets]
        where = spec.config.assets_dir or "(no --assets directory given)"
        raise InfraError("infra_assets_missing", f"missing asset {first.name!r} ({first.cache_path}) in {where}, needed "
                         f"by {', '.join(stages)}: run `reb-ray assets fetch` on a machine with internet access, "
                         "or sweep with --skip-missing-assets to measure the stages that need none")


def run_trial(spec: TrialSpec, gpus: list[str] | None = None, no_gpus_reason: str | None = None,
              llm_proxy: ProxyClient | None = None, ship_artifacts: bool = False,
              gpu_lease: GpuLease | None = None) -> TrialOutcome:
    """Run one attempt. `gpus` are the physical GPU ids assigned to it (may be empty).

    `no_gpus_reason` says why this node cannot give the sandbox GPUs (its Docker lacks the
    NVIDIA runtime: `docker_gpu_problems`); then the sandbox gets none, the CPU stages
    run, and the GPU stages are `insufficient_hardware` with that reason (never retried).
    `llm_proxy` is the node's metering proxy for an LLM agent (the orchestrator's); None starts
    a private one in this process, which reads the real key from this process's environment.
    The attempt's logs are staged on this node; `ship_artifacts` returns them in the outcome for
    the driver to store (a cluster without a shared filesystem), else they are moved into the
    sweep's output directory here (`artifacts.deliver`).
    `gpu_lease` (a GPU-sharing sweep's GPU trial; then `gpus` is empty): the agent sandbox gets
    its `agent_gpus`, held by nobody, and the probe phase the GPUs it leases exclusively.
    """
    gpus = [] if no_gpus_reason else (gpus or [])
    rec = TrialRecorder(spec)
    split = PhaseSplit(rec, gpu_lease, spec.task) if gpu_lease is not None and not no_gpus_reason else None
    redactor = Redactor(spec.credentials.values())
    staging = Path(tempfile.mkdtemp(prefix="reb-ray-artifacts-"))
    rec.artifacts = TrialArtifacts(staging, spec.sweep_id, spec.trial_id, spec.attempt, redactor)
    t0 = time.monotonic()
    sandbox: Sandbox | None = None
    llm: TrialLlm | None = None
    slot = NoSlot()
    egress = TrialEgress(spec.config)
    workspace = Path(tempfile.mkdtemp(prefix="reb-ray-trial-"))
    rec.row.update(fingerprint(spec.config.sandbox))  # environment artifacts: the node's hardware
    env_phase = EnvironmentPhase(rec, spec, redactor.secrets)  # environment artifacts
    try:
        _preflight(spec)
        placed = place_repo(spec.task, workspace, spec.config.repo_mirrors)
        rec.row["repo_commit"] = placed.commit
        agent = get_agent(spec.agent_spec)
        # The agent toolchain, for the agent phase only (`toolchain_slot`).
        slot = toolchain_slot(agent.uses_toolchain, spec.config.sandbox, spec.config.toolchains_dir).open()
        config, pip_env = _sandbox_config(spec, gpus)
        config = split.agent_config(config) if split else config  # GPUs shown, held by nobody
        config.propagated_mounts.update(slot.mounts)
        # reb-ray's network for the policy, behind the host guard; under `registries` egress
        # only through this attempt's allow-listing proxy (`TrialEgress`).
        config = egress.open(config)
        sandbox = open_sandbox(spec.config.sandbox, config, trusted=agent.trusted, allow_unsafe=spec.config.unsafe_local)
        egress.attach(sandbox)
        rec.row.update(sandbox_shm_bytes=config.shm_size_bytes if sandbox.capabilities.image else None,
                       # whether the engine applied memory, pids and CPU limits (a rootless one may drop them)
                       sandbox_limits_enforced=sandbox.capabilities.enforces_limits if sandbox.capabilities.image else None,
                       sandbox_pids_limit=config.pids_limit, sandbox_memory_bytes=config.memory_bytes,
                       sandbox_disk_quota_bytes=config.disk_quota_bytes)
        repo_dir = f"{sandbox.workdir}/repo"
        sandbox.put(placed.path, repo_dir)
        baseline = tracked_state(sandbox, repo_dir)  # the state before the agent: what was already off is not the agent's
        report_path = REPORT_PATH if sandbox.capabilities.fixed_paths else f"{sandbox.workdir}/../report/report.json"
        # An LLM agent reaches its model only through the node's proxy, with a stand-in key:
        # its real key never enters the sandbox (`TrialLlm`).
        llm = TrialLlm(agent, spec, llm_proxy, sandbox.provider).open()
        egress.allow_llm(llm.access)
        ctx = AgentContext(repo_dir, report_path, spec.config.agent_timeout_s, {**pip_env, **llm.sandbox_credentials()},
                           prompt=render_prompt(spec.task, report_path, repo_dir), toolchain=slot.sandbox_path,
                           llm=llm.access)
        ended_by, refused_key = _agent_phase(rec, sandbox, agent, ctx, llm)
        if refused_key:  # the endpoint refused the key: the agent phase was ended at once, never retried
            raise InfraError("infra_llm_auth", f"the LLM endpoint refused the trial's key ({refused_key}); "
                                               "the agent phase was ended")
        report = _between_phases(rec, sandbox, report_path, repo_dir, baseline, placed.path)
        llm.judge(report)  # failed because of its LLM endpoint (429, 5xx, auth, budget): infra, not the agent's
        slot.detach()  # gone before any probe runs: not on their PATH, not in the env size
        env_phase.run(sandbox, repo_dir, report)  # environment artifacts: manifest, then the container committed
        probe_t0 = time.monotonic()
        if ended_by:  # a sandbox limit stopped the agent (`LimitWatch`): nothing is probed
            rec.apply(agent_failed(spec.task, PROBE_STAGES, *ended_by))
        else:
            if split:  # the agent's sandbox committed, exclusive GPUs leased, the probe sandbox opened
                sandbox, gpus = split.probe_sandbox(sandbox)
                egress.attach(sandbox)
                probe_t0 = time.monotonic()  # the commit and the wait have columns of their own
            run_probe_phase(rec, sandbox, spec, repo_dir, report, gpus, c1_sandbox=split.c1_opener() if split else None)
            if split:
                split.release_gpus()  # the GPU work is done: the next probe phase on the node may start
            # The harness's own container fetches from the index on Docker's default bridge
            # (or the sweep's explicit network): it runs no agent code.
            _fill_package_cache(rec, spec, config.model_copy(update={"network": harness_network(spec.config)}),
                                sandbox, report)
        if no_gpus_reason:
            rec.explain_hardware(no_gpus_reason)
        rec.row["probe_wall_time_s"] = time.monotonic() - probe_t0
        rec.settle()
    except InfraError as exc:
        rec.infra(exc.category, str(exc))
    except RebRayError as exc:
        rec.infra("infra_sandbox", str(exc))
    except requests.exceptions.ConnectionError as exc:  # the Docker daemon went away mid-attempt (a restart): infra, retried
        rec.infra("infra_daemon", f"Docker daemon connection lost: {exc}")
    except Exception as exc:  # a harness bug must not be scored against the agent
        rec.infra("infra_harness", f"{type(exc).__name__}: {exc}")
    finally:
        env_phase.settle()  # environment artifacts: keep the committed image or remove it
        if llm is not None:
            rec.row.update(llm.close(rec.artifacts))  # an error path: still unregistered, its tokens kept
        if sandbox is not None:
            try:
                sandbox.close()
            except Exception as exc:  # noqa: BLE001 - a removal failure must not hide the result
                rec.row["failure_reason"] = (rec.row.get("failure_reason") or "") + f" [close failed: {exc}]"
        if split is not None and (problem := split.close()):  # its sandboxes, its image, its lease
            rec.row["failure_reason"] = (rec.row.get("failure_reason") or "") + f" [close failed: {problem}]"
        slot.close()
        rec.row.update(egress.close(rec.artifacts))  # after the sandbox: every connection it made is logged
        shutil.rmtree(workspace, ignore_errors=True)
    rec.row["trial_wall_time_s"] = time.monotonic() - t0
    outcome = rec.outcome(redactor)
    artifacts.deliver(outcome, staging, spec.config.output.resolve(), ship_artifacts)
    return outcome



def _agent_phase(rec: TrialRecorder, sandbox: Sandbox, agent: Agent, ctx: AgentContext,
                 llm: TrialLlm) -> tuple[tuple[str, str] | None, str | None]:
    """Run the agent under the sandbox's limit watch and the LLM key's watch (an LLM agent whose
    key the endpoint refuses has its processes killed within seconds: TrialLlm.watch_auth).
    Returns ((category, reason) of a sandbox limit that ended the phase (pids_limit,
    disk_quota, oom), else None; why the key was refused when that ended it, else None)."""
    # Every exec of the agent streams into one full-log artifact, whatever the agent's code does.
    started = time.monotonic()
    with rec.full_log("agent") as log, watch_limits(sandbox) as watch, \
            llm.watch_auth(sandbox.kill_leftovers) as auth:
        tapped = TappedSandbox(sandbox, log)
        try:
            run = agent.run(tapped, ctx)
        except RebRayError:
            if watch.fired is None and auth.fired is None:
                raise
            run = AgentRun(exit_code=None, timed_out=False, wall_time_s=time.monotonic() - started, output="")
    ended_by = watch.verdict(run.exit_code, run.timed_out)
    if ended_by:
        run.limit = limit_setting(ended_by[0], sandbox.config)
        ended_by = (ended_by[0], f"{run.limit}: {ended_by[1]}")
    rec.row.update(sandbox_limit_fired=ended_by[0] if ended_by else None, sandbox_oom_kills=watch.oom_kills,
                   sandbox_disk_peak_bytes=watch.disk_peak_bytes)
    # Tokens, cost and request log from the proxy; the transcript stored. A per-trial cost
    # limit that stopped the agent becomes run.limit (the agent's own limit).
    rec.row.update(llm.finish(run, rec.artifacts))
    # Shortcuts in the agent's own commands (its transcript, where it left one): kept for the
    # probe phase's start-up record (`grade_startup`).
    rec.trajectory_hits = trajectory_hits([c.command for c in commands(run.transcript)]) if run.transcript else []
    rec.row.update(agent_exit_code=run.exit_code, agent_timed_out=run.timed_out, agent_wall_time_s=run.wall_time_s,
                   agent_output_tail=run.output[-DEFAULT_HEAD_BYTES:], agent_limit=run.limit,
                   agent_log_path=log.path if log is not None and log.error is None else None,
                   agent_version=run.agent_version, report_source=run.report_source)
    result = ExecResult(exit_code=run.exit_code, timed_out=run.timed_out, duration_s=run.wall_time_s, output=run.output)
    status = "success" if run.exit_code == 0 and not run.timed_out else "failure"
    category = ended_by[0] if ended_by else "timeout" if run.timed_out else None
    rec.stage("agent", status, result=result, reason=run.limit, failure_category=category,
              log=log, total_bytes=max(tapped.total_bytes, len(run.output.encode())))
    return ended_by, auth.fired


def _fill_package_cache(rec: TrialRecorder, spec: TrialSpec, config: SandboxConfig, sandbox: Sandbox,
                        report: Report | None) -> None:
    """Add the wheels of what the reported interpreter holds to the node's cache, downloaded
    from the index by the harness (`package_cache.fill`); never fails the trial."""
    if not spec.config.pip_cache or not sandbox.capabilities.image or report is None:
        return
    try:  # a sandbox the agent stopped has nothing to list: the trial's verdict stands
        listed = package_cache.installed(sandbox, report.python_path)
        if listed is not None:
            rec.row["pip_cache_filled"] = len(package_cache.fill(spec.config.pip_cache_dir, config, *listed,
                                                                        provider=spec.config.sandbox))
    except RebRayError:
        pass  # the cache stays as it was: slower later trials, never a different result


def _between_phases(rec: TrialRecorder, sandbox: Sandbox, report_path: str, repo_dir: str,
                    baseline: dict[str, str] | None, pinned_checkout: Path | None = None) -> Report | None:
    """Stop everything the agent left running, copy the report out, record repo changes
    (`settle`: one exec in a Docker sandbox), then put the tracked files back
    to the pinned commit (`restore_pinned`; `pinned_checkout` is the host's checkout).

    Leftovers are stopped first so nothing swaps the report while it is read; a report that is
    not a regular file (a symlink, FIFO, directory) or is over MAX_REPORT_BYTES is the agent's
    invalid_report, never a harness error.
    """
    settled = settle(sandbox, report_path, repo_dir, MAX_REPORT_BYTES)
    stopped = settled.stopped
    rec.row.update(leftover_processes=None if stopped is None else len(stopped),
                   leftover_commands=None if stopped is None else [c[:LEFTOVER_CHARS] for c in stopped[:LEFTOVERS_KEPT]])
    data, written = settled.report, not isinstance(settled.report_error, FileNotFoundError)
    if isinstance(settled.report_error, UnreadableFile):
        status, report, reason = "invalid_report", None, str(settled.report_error)
    else:
        status, report, reason = parse_report(data)
    rec.row.update(report_status=status, report_python_path=report.python_path if report else None,
                   report_source=rec.row.get("report_source") or ("agent_file" if written else "none"))
    rec.stage("report", "success" if report else "failure", reason=reason, failure_category=None if report else status,
              raw=data.decode(errors="replace") if data else None)
    _record_changes(rec, baseline, settled.state)
    _restore_repo(rec, sandbox, repo_dir, baseline, settled.state, pinned_checkout)
    return report


def _restore_repo(rec: TrialRecorder, sandbox: Sandbox, repo_dir: str, baseline: dict[str, str] | None,
                  after: dict[str, str] | None, pinned_checkout: Path | None) -> None:
    """The stages run the pinned repository: restore the tracked files the agent changed; when
    git in the sandbox cannot (its .git removed or broken), copy the host's pinned checkout over
    the repository and restore again (then which files differed is unknown: null)."""
    commit = rec.row.get("repo_commit")
    keep = unchanged_by_agent(baseline, after)
    columns = restore_pinned(sandbox, repo_dir, commit, keep)
    if columns["repo_restored"] is not True and commit and pinned_checkout is not None:
        try:
            sandbox.put(pinned_checkout, repo_dir)
        except (RebRayError, OSError):
            pass
        else:
            again = restore_pinned(sandbox, repo_dir, commit, keep)
            columns = {"repo_head_moved": columns["repo_head_moved"], "repo_restored": again["repo_restored"],
                       "repo_restored_files": columns["repo_restored_files"]}
    rec.row.update(columns)


def _record_changes(rec: TrialRecorder, baseline: dict[str, str] | None, after: dict[str, str] | None) -> None:
    """Record `repo_modified(_files)` from the states before and after the agent phase."""
    if baseline is None or after is None:
        return
    files = changed_since(baseline, after)
    rec.row.update(repo_modified=bool(files), repo_modified_files=files)
