"""The preparation of one trial attempt: everything before the agent runs, all of it infrastructure.

`prepare(spec, rec, gpus, ...)` checks the node (`preflight`), places the repository on the
host, opens the agent's toolchain slot, makes the sandbox's config (`sandbox_config`), opens
the attempt's egress, opens the sandbox, copies the repository in, records the state of its
tracked files before the agent (the baseline: what was already off is never the agent's),
registers an LLM agent with the node's metering proxy and builds the agent's context. Each
part goes into a `Prepared` as soon as it is open, so that `Prepared.close(rec)` releases
what is there on every path, a failing preparation included: the LLM registration, the
sandbox, the phase split, the toolchain slot, the egress proxy, the host workspace, in that
order, recording what they leave in the attempt's result. The caller makes the `Prepared` before it
prepares (`Prepared.begin`) and closes it after it has recorded the attempt's outcome, so
that a note about a part that could not be removed is appended to the failure, never
overwritten by it.

The LLM session helper of the tests and benchmarks (`reb_ray.testing.llm_session`) prepares
its sandbox with this same function, so it runs an agent exactly as a trial sets it up.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from reb_ray.agents import REPORT_PATH, Agent, AgentContext, get_agent
from reb_ray.agents.prompt import render_prompt
from reb_ray.agents.toolchain_mount import NoSlot, ToolchainSlot, toolchain_slot
from reb_ray.errors import InfraError
from reb_ray.models.sweep import TrialSpec
from reb_ray.sandbox.ownership import RUN
from reb_ray.sandbox import Sandbox, SandboxConfig, capabilities_of, open_sandbox
from reb_ray.sandbox import package_cache
from reb_ray.sandbox.limits import default_memory_bytes
from reb_ray.sandbox.scratch import make_scratch
from reb_ray.suite.assets import missing_by_stage
from reb_ray.suite.placement import PlacedRepo, place_repo
from reb_ray.trial.egress import TrialEgress, harness_network
from reb_ray.trial.llm import ProxyClient, TrialLlm
from reb_ray.trial.phase_split import PhaseSplit
from reb_ray.trial.probe_phase import ASSETS_MOUNT
from reb_ray.trial.record import TrialRecorder
from reb_ray.trial.repo_state import tracked_state

WHEELHOUSE_MOUNT = "/opt/reb-ray/wheelhouse"
PIP_CACHE_MOUNT = package_cache.CACHE_MOUNT

__all__ = ["PIP_CACHE_MOUNT", "WHEELHOUSE_MOUNT", "Prepared", "preflight", "prepare", "sandbox_config"]


def sandbox_config(spec: TrialSpec, gpus: list[str]) -> tuple[SandboxConfig, dict[str, str]]:
    """The sandbox config and the agent's pip environment (find-links and cache)."""
    cfg = spec.config
    caps = capabilities_of(cfg.sandbox.provider)
    # Host directories (wheelhouses, assets, the pip cache, the CA bundle) are bind-mounted at
    # fixed sandbox paths; without mounts the sandbox is given the host paths as they are.
    binds = caps.mounts
    # A container's engine takes the cpus, memory, pids and disk limits (an engine that drops
    # them says so in the open sandbox's capabilities); host processes get none.
    contained = caps.container_runtime is not None
    mounts = {str(w): f"{WHEELHOUSE_MOUNT}/{i}" for i, w in enumerate(cfg.sandbox.wheelhouses)} if binds else {}
    if binds and cfg.assets_dir is not None:
        # Mounted from the start (Docker cannot add a mount later); read-only, and only the
        # probe phase gets the variables that point at it.
        mounts[str(cfg.assets_dir)] = ASSETS_MOUNT
    pip_env: dict[str, str] = {}
    find_links = [mounts[str(w)] for w in cfg.sandbox.wheelhouses] if binds else [str(w) for w in cfg.sandbox.wheelhouses]
    if cfg.sandbox.pip_cache:
        # The node's wheel cache: read-only find-links, filled by the harness after trials
        # (`package_cache.fill`); each trial's own ~/.cache/pip dies with it.
        cfg.sandbox.pip_cache_dir.mkdir(parents=True, exist_ok=True)
        if binds:
            mounts[str(cfg.sandbox.pip_cache_dir)] = PIP_CACHE_MOUNT
        find_links.append(PIP_CACHE_MOUNT if binds else str(cfg.sandbox.pip_cache_dir))
    else:
        pip_env["PIP_NO_CACHE_DIR"] = "1"
    if find_links:
        pip_env["PIP_FIND_LINKS"] = " ".join(find_links)
    memory = cfg.sandbox.memory_bytes or default_memory_bytes(cfg.sandbox.cpus_per_trial, cfg.cluster.max_concurrent)
    config = SandboxConfig(
        image=spec.image, gpus=gpus, cpus=cfg.sandbox.cpus_per_trial if contained else None,
        memory_bytes=memory if contained else None,
        pids_limit=cfg.sandbox.pids_limit if contained else None, disk_quota_bytes=cfg.sandbox.disk_quota_bytes if contained else None,
        shm_size_bytes=cfg.sandbox.shm_size_bytes, network=harness_network(cfg), ca_bundle=cfg.sandbox.ca_bundle if binds else None,
        mounts=mounts, sweep_id=spec.sweep_id, trial_id=spec.trial_id, attempt=spec.attempt,
        labels={RUN: spec.run_id} if spec.run_id else {},
    )
    return config, pip_env


def preflight(spec: TrialSpec) -> None:
    """Fail fast, before any agent time is spent, on what the node lacks (all infra).

    A missing asset that an applicable stage needs fails the attempt here (infra_assets_missing,
    naming the asset and its stages) unless the sweep runs with --skip-missing-assets: then the
    probe phase leaves only those stages not_run and the rest is measured and scored.
    """
    if capabilities_of(spec.config.sandbox.provider).image:  # a restarting daemon: the attempt waits for it, bounded, not fails
        from reb_ray.sandbox import provider_class

        provider_class(spec.config.sandbox.provider).wait_for_engine()
    free = shutil.disk_usage(tempfile.gettempdir()).free
    if free < spec.config.cluster.min_free_bytes:  # a full disk is infra (owner: infra), found before the agent runs
        raise InfraError("infra_disk_full", f"{free / 1e9:.1f} GB free, need {spec.config.cluster.min_free_bytes / 1e9:.1f} GB")
    missing = missing_by_stage(spec.task, spec.config.assets_dir)
    if missing and not spec.config.skip_missing_assets:
        first = next(iter(missing.values()))[0]
        stages = [stage for stage, assets in missing.items() if first in assets]
        where = spec.config.assets_dir or "(no --assets directory given)"
        raise InfraError("infra_assets_missing", f"missing asset {first.name!r} ({first.cache_path}) in {where}, needed "
                         f"by {', '.join(stages)}: run `reb-ray assets fetch` on a machine with internet access, "
                         "or sweep with --skip-missing-assets to measure the stages that need none")


@dataclass
class Prepared:
    """The parts of a prepared attempt; `close(rec)` releases them, on every path.

    `sandbox` is the sandbox the next phase runs in (the probe phase of a GPU-sharing sweep
    replaces it with its own); `config` the agent sandbox's config as created; `baseline` the
    tracked files' state before the agent (None: unknown); `placed` the host's checkout of the
    pinned commit; `split` the move to probe sandboxes of a GPU-sharing sweep, else None.
    """

    spec: TrialSpec
    workspace: Path
    egress: TrialEgress
    split: PhaseSplit | None = None
    slot: NoSlot | ToolchainSlot = field(default_factory=NoSlot)
    agent: Agent | None = None
    placed: PlacedRepo | None = None
    config: SandboxConfig | None = None
    pip_env: dict[str, str] = field(default_factory=dict)
    sandbox: Sandbox | None = None
    repo_dir: str = ""
    report_path: str = ""
    baseline: dict[str, str] | None = None
    llm: TrialLlm | None = None
    ctx: AgentContext | None = None

    @classmethod
    def begin(cls, spec: TrialSpec, split: PhaseSplit | None = None) -> Prepared:
        """An attempt with nothing opened yet: its host workspace and its (closed) egress."""
        return cls(spec=spec, workspace=make_scratch("reb-ray-trial-"),
                   egress=TrialEgress(spec.config), split=split)

    def close(self, rec: TrialRecorder) -> None:
        """Release every part, in order; never raises. The LLM registration is closed first (an
        error path: still unregistered, its tokens kept), the egress proxy after the sandbox
        (every connection it made is logged); a removal that fails is appended to the
        settlement's `failure_reason` rather than hiding the result."""
        if self.llm is not None:
            rec.result.llm.set(**self.llm.close(rec.artifacts))
        if self.sandbox is not None:
            try:
                self.sandbox.close()
            except Exception as exc:  # noqa: BLE001 - a removal failure must not hide the result
                rec.result.settlement.note(f" [close failed: {exc}]")
        if self.split is not None and (problem := self.split.close()):  # its sandboxes, its image, its lease
            rec.result.settlement.note(f" [close failed: {problem}]")
        self.slot.close()
        rec.result.network.set(**self.egress.close(rec.artifacts))
        shutil.rmtree(self.workspace, ignore_errors=True)


def prepare(p: Prepared, rec: TrialRecorder, gpus: list[str], llm_proxy: ProxyClient | None = None) -> Prepared:
    """Prepare the attempt `p` began (module docstring), recording the repository's commit and
    the sandbox's limits (`SandboxSetup`), and return it. `gpus` are the agent sandbox's physical GPU
    ids (`p.split` shows it a GPU-sharing sweep's GPUs instead); `llm_proxy` is the node's
    metering proxy (None: a private one in this process). Raises what the failing step raises;
    the caller still closes `p`."""
    spec = p.spec
    preflight(spec)
    p.placed = place_repo(spec.task, p.workspace, spec.config.repo_mirrors)
    rec.result.setup.repo_commit = p.placed.commit
    p.agent = agent = get_agent(spec.agent_spec)
    # The agent toolchain, for the agent phase only (`toolchain_slot`).
    p.slot = toolchain_slot(agent.uses_toolchain, spec.config.sandbox.provider, spec.config.sandbox.toolchains_dir).open()
    config, p.pip_env = sandbox_config(spec, gpus)
    config = p.split.agent_config(config) if p.split else config  # GPUs shown, held by nobody
    config.propagated_mounts.update(p.slot.mounts)
    # reb-ray's network for the policy, behind the host guard; under `registries` egress
    # only through this attempt's allow-listing proxy (`TrialEgress`).
    p.config = config = p.egress.open(config)
    p.sandbox = sandbox = open_sandbox(spec.config.sandbox.provider, config, trusted=agent.trusted,
                                       allow_unsafe=spec.config.sandbox.unsafe_local)
    p.egress.attach(sandbox)
    setup = rec.result.setup
    setup.sandbox_shm_bytes = config.shm_size_bytes if sandbox.capabilities.image else None
    # whether the engine applied memory, pids and CPU limits (a rootless one may drop them)
    setup.sandbox_limits_enforced = sandbox.capabilities.enforces_limits if sandbox.capabilities.image else None
    setup.sandbox_pids_limit, setup.sandbox_memory_bytes = config.pids_limit, config.memory_bytes
    setup.sandbox_disk_quota_bytes = config.disk_quota_bytes
    p.repo_dir = repo_dir = f"{sandbox.workdir}/repo"
    sandbox.put(p.placed.path, repo_dir)
    p.baseline = tracked_state(sandbox, repo_dir)  # the state before the agent: what was already off is not the agent's
    p.report_path = report_path = REPORT_PATH if sandbox.capabilities.fixed_paths else f"{sandbox.workdir}/../report/report.json"
    # An LLM agent reaches its model only through the node's proxy, with a stand-in key:
    # its real key never enters the sandbox (`TrialLlm`).
    p.llm = llm = TrialLlm(agent, spec, llm_proxy, sandbox.provider).open()
    p.egress.allow_llm(llm.access)
    p.ctx = AgentContext(repo_dir, report_path, spec.config.agent_timeout_s, {**p.pip_env, **llm.sandbox_credentials()},
                         prompt=render_prompt(spec.task, report_path, repo_dir), toolchain=p.slot.sandbox_path,
                         llm=llm.access, task=spec.task)
