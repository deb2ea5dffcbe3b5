"""Sweep configuration and trial specs: what the driver expands and ships to Ray actors."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from reb_ray.models.agent import AgentSpec
from reb_ray.netpolicy.allowlist import DEFAULT_ALLOW, parse_pattern
from reb_ray.models.task import TaskSpec
from reb_ray.sandbox import PROVIDERS, capabilities_of

HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
#: A node-local wheel directory used as find-links by default when present (e.g. a CPU torch).
NODE_WHEELHOUSE = Path("/opt/wheels")
GiB = 1024**3


class SweepConfig(BaseModel):
    """One sweep's configuration (flags override `--config sweep.toml` values).

    Times are seconds, sizes bytes. `sweep_id` defaults to a hash of what defines the trial
    set (suite, task pattern, agents, trials), so rerunning the same sweep resumes it.

    `agents` are agent names in order; each is a key of `agent_specs` (the `[agents.NAME]`
    tables of sweep.toml) or a shorthand `kind`, `kind@model`, `package.module:Class`.
    """

    model_config = ConfigDict(extra="forbid")

    suite: str = "demo"
    tasks_root: Path | None = None  # directory of suites; default: the bundled tasks/
    tasks: str | None = None
    agent_specs: dict[str, AgentSpec] = Field(default_factory=dict)
    agents: list[str] = Field(default_factory=lambda: ["heuristic", "noop"], min_length=1)
    trials: int = Field(1, ge=1)
    output: Path = Path("reb-runs")
    address: str | None = None
    max_concurrent: int | None = Field(None, ge=1)
    repo_mirrors: list[Path] = Field(default_factory=list)
    wheelhouses: list[Path] = Field(default_factory=lambda: [NODE_WHEELHOUSE] if NODE_WHEELHOUSE.is_dir() else [])
    sandbox: str = "docker"
    unsafe_local: bool = False
    image_profile: str = "minimal"
    pip_cache: bool = True
    # The node's wheel cache, read-only to trials and filled by the harness (reb_ray/sandbox/package_cache.py).
    pip_cache_dir: Path = Path.home() / ".cache" / "reb-ray" / "wheels"
    ca_bundle: Path | None = HOST_CA_BUNDLE if HOST_CA_BUNDLE.exists() else None
    # The Docker network of the sandboxes. None (the default): reb-ray's own for the policy,
    # whose host guard closes the node's services to them (reb_ray/netpolicy/network.py). A name
    # (e.g. "bridge", Docker's default bridge) under `open`: that network as it is, unguarded,
    # recorded in the row (`network_host_guard` false) and warned about at sweep start.
    network: str | None = Field(None, min_length=1)
    # Egress of the sandboxes (`TrialEgress`): `open` (the default: research
    # repositories fetch from many hosts) or `registries`: only the hosts of `network_allow` (host
    # patterns, `DEFAULT_ALLOW`; a list replaces the default) and the node's LLM proxy,
    # through a per-trial allow-listing proxy; docker sandbox only.
    network_policy: Literal["open", "registries"] = "open"
    network_allow: list[str] = Field(default_factory=lambda: list(DEFAULT_ALLOW))
    cpus_per_trial: float = Field(1.0, gt=0)
    # Sandbox limits, in bytes and processes (`hardening_kwargs`, `LimitWatch`). memory_bytes None: the
    # node's memory x 0.8 / its sandbox slots (limits.default_memory_bytes), decided on the node.
    memory_bytes: int | None = Field(None, gt=0)
    pids_limit: int = Field(4096, ge=64)
    disk_quota_bytes: int = Field(50 * GiB, gt=0)  # the writable layer, watched during the agent phase
    agent_timeout_s: float = Field(1800.0, gt=0)
    max_attempts: int = Field(2, ge=1, description="attempts per trial when infra fails")
    min_free_bytes: int = 2 * GiB
    assets_dir: Path | None = None  # read-only asset cache for the probes (--assets)
    # A missing asset fails the trial before the agent runs (infra, retried) unless this is set:
    # then the agent runs, only the stages needing the asset are left not_run, the rest is scored.
    skip_missing_assets: bool = False
    shm_size_bytes: int = 16 * GiB  # /dev/shm of each sandbox, bytes (Docker's 64 MB breaks DataLoader/NCCL)
    toolchains_dir: Path | None = None  # agent toolchains (reb-ray agents install); default ~/.cache/reb-ray/toolchains
    c4_cpu_gloo: bool = False  # test switch: run C4 on CPU with gloo when no GPUs exist
    # Agent-phase GPU sharing (`PhaseSplit`): agent phases run on CPU slots of GPU nodes and
    # see GPUs without holding them; each probe phase leases its node's GPUs exclusively.
    share_gpus_in_agent_phase: bool = False
    # LLM agents. The sweep's budget in USD: no new trial is launched once the cost
    # recorded in its rows (every attempt, earlier runs included) reaches it. Not part of the
    # sweep id: a resume with a larger budget continues the same sweep.
    max_cost_usd: float | None = Field(None, gt=0)
    # Backoff before retrying an attempt that failed for a rate limit or an unavailable endpoint:
    # base * 2**(n-1) seconds for its n-th such retry, at least the endpoint's Retry-After, capped.
    llm_retry_backoff_s: float = Field(10.0, ge=0)
    llm_retry_backoff_max_s: float = Field(300.0, ge=0)
    prices_file: Path | None = None  # a user price table over the shipped one (reb_ray/llm/prices.py)
    # W&B (`WandbLog`): the project the driver logs rows to, or None.
    # Not part of the sweep id: where rows are mirrored does not change a trial.
    wandb_project: str | None = None
    wandb_timeout_s: float = Field(60.0, gt=0)  # the bound on W&B's finish; past it W&B is abandoned
    rerun: bool = False
    # Run every trial this sweep has not scored itself, reusing none scored by other sweeps of the
    # output directory (reb_ray/sweep/trial_identity.py).
    fresh: bool = False
    # Resume with scoring settings that differ from the sweep's first run (reb_ray/sweep/identity.py);
    # the drifted fields are recorded in the identity file and in each new row's `config_drift`.
    allow_drift: bool = False
    sweep_id: str | None = None
    # Which attempts keep their agent's container as an image (reb_ray/environment/keep.py):
    # none | successes | scored | all. Not part of the sweep id: keeping does not change a trial.
    keep_environments: Literal["none", "successes", "scored", "all"] = "successes"
    # The node's budget for kept images, bytes of their own layers, all sweeps together, applied
    # oldest-first after each kept commit (reb_ray/environment/keep.py). None: 50 GiB, or half of
    # the Docker data root's free disk (plus what kept images hold) when that is less.
    env_disk_budget_bytes: int | None = Field(None, ge=0)
    # After the sweep, export each success not verified before and rebuild it to verify it
    # (reb_ray/sweep/verify_exports.py). Not part of the sweep id: it reads the trials, changes none.
    verify_exports: bool = False

    @field_validator("agent_specs", mode="before")
    @classmethod
    def _named_specs(cls, value):
        """A table's key is its spec's name (`[agents.sonnet]` is the agent `sonnet`)."""
        if not isinstance(value, dict):
            return value
        out = {}
        for key, spec in value.items():
            if isinstance(spec, dict):
                if spec.get("name", key) != key:
                    raise PydanticCustomError("agent_name", "table {key} names itself {name}",
                                              {"key": repr(key), "name": repr(spec["name"])})
                spec = {**spec, "name": key}
            out[key] = spec
        return out

    @field_validator("network_allow")
    @classmethod
    def _host_patterns(cls, value: list[str]) -> list[str]:
        for pattern in value:
            try:
                parse_pattern(pattern)
            except ValueError as exc:
                raise PydanticCustomError("host_pattern", "{msg}", {"msg": str(exc)}) from None
        return value

    @field_validator("network_policy")
    @classmethod
    def _policy_needs_docker(cls, value: str, info: ValidationInfo) -> str:
        sandbox, network = info.data.get("sandbox"), info.data.get("network")
        own_network = sandbox in PROVIDERS and capabilities_of(sandbox).own_network
        if value == "registries" and not own_network:
            raise PydanticCustomError("network_policy", "the {sandbox} sandbox shares the node's network, which no "
                                      "proxy can restrict: `registries` needs the docker sandbox", {"sandbox": sandbox})
        if value == "registries" and network in ("host", "none"):
            raise PydanticCustomError("network_policy", "`registries` puts sandboxes on reb-ray's internal network; "
                                      "it cannot be combined with network '{network}'", {"network": network})
        return value

    @field_validator("agents")
    @classmethod
    def _known_agents(cls, value: list[str], info: ValidationInfo) -> list[str]:
        specs = info.data.get("agent_specs") or {}
        for name in value:
            if name not in specs:
                try:
                    AgentSpec.from_shorthand(name)
                except ValidationError as exc:
                    where = f" (no [agents.{name}] table)" if specs else ""
                    raise PydanticCustomError("agent", "agent {name}{where}: {msg}",
                                              {"name": repr(name), "where": where, "msg": exc.errors()[0]["msg"]}) from None
        return value

    def agent_spec(self, name: str) -> AgentSpec:
        """The spec of agent `name`: its `[agents.NAME]` table, else the shorthand parsed."""
        return self.agent_specs.get(name) or AgentSpec.from_shorthand(name)

    def resolved_sweep_id(self) -> str:
        """`sweep_id`, or `<suite>-<hash8>` of the trial-defining fields.

        An agent whose spec is more than its name says (a table, extra arguments, limits) adds
        its identity (AgentSpec.identity: kind, model, arguments, limits; never the endpoint). A
        network policy other than `open` adds itself and its allow-list (what a trial may fetch).
        """
        if self.sweep_id:
            return self.sweep_id
        parts: list = [self.suite, self.tasks, sorted(self.agents), self.trials, self.sandbox]
        identities = {name: self.agent_spec(name).identity() for name in sorted(set(self.agents))
                      if self.agent_spec(name).identity() != _shorthand_identity(name)}
        if identities:  # kept out otherwise, so sweeps of plain names keep their ids
            parts.append(identities)
        if self.network_policy != "open":  # kept out for `open`, so existing sweeps keep their ids
            parts.append({"network_policy": self.network_policy, "network_allow": sorted(self.network_allow)})
        key = json.dumps(parts, sort_keys=True)
        return f"{self.suite}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"


def _shorthand_identity(name: str) -> dict | None:
    try:
        return AgentSpec.from_shorthand(name).identity()
    except (ValidationError, PydanticCustomError):
        return None


class TrialSpec(BaseModel):
    """One attempt of one (agent, task, trial index): everything a node needs to run it."""

    sweep_id: str
    agent: str
    task: TaskSpec
    trial_index: int
    attempt: int = 1
    retries_left: int = 0  # further attempts allowed in this run if this one fails for infra reasons
    rerun: bool = False  # `--rerun` runs this trial again although an earlier attempt was scored
    config: SweepConfig
    image: str | None = None  # the sandbox image tag, resolved on the driver
    # The driver's token for this run of the sweep (drawn at its start): the `reb-ray.run` label
    # of its containers, so removing a dead attempt's containers never takes those of another
    # sweep with the same sweep id (same configuration, another output directory) on the node.
    run_id: str | None = None
    # The agent's own credentials, read from the driver's environment; never written anywhere.
    credentials: dict[str, str] = Field(default_factory=dict, repr=False, exclude=True)

    @property
    def agent_spec(self) -> AgentSpec:
        """The spec of this trial's agent (`agent` is its name)."""
        return self.config.agent_spec(self.agent)

    @property
    def trial_id(self) -> str:
        return f"{self.agent}/{self.task.id}/{self.trial_index}"

    def next_attempt(self) -> "TrialSpec":
        return self.model_copy(update={"attempt": self.attempt + 1, "retries_left": self.retries_left - 1})
