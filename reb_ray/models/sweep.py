"""Sweep configuration and trial specs: what the driver expands and ships to Ray actors."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from reb_ray.models.agent import AgentSpec
from reb_ray.netpolicy.allowlist import DEFAULT_ALLOW, parse_pattern
from reb_ray.models.task import TaskSpec
from reb_ray.sandbox import PROVIDERS, capabilities_of

HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
#: A node-local wheel directory used as find-links by default when present (e.g. a CPU torch).
NODE_WHEELHOUSE = Path("/opt/wheels")
GiB = 1024**3
#: A suite named `harbor:PATH` is the Harbor task or directory of tasks at PATH (docs/harbor.md).
HARBOR_PREFIX = "harbor:"


class _Section(BaseModel):
    """A section of the sweep configuration: a `[name]` table of sweep.toml; unknown keys fail."""

    model_config = ConfigDict(extra="forbid")


class SandboxSettings(_Section):
    """`[sandbox]`: where each trial's sandbox runs and what it is given. Sizes are bytes.

    `provider` is the sandbox kind (docker, podman, local, sleep); the limits are applied by
    the engine (`hardening_kwargs`) and watched during the agent phase (`LimitWatch`).
    """

    provider: str = "docker"
    image_profile: str = "minimal"
    cpus_per_trial: float = Field(default=1.0, gt=0)
    # memory_bytes None: the node's memory x 0.8 / its sandbox slots (limits.default_memory_bytes), decided on the node.
    memory_bytes: int | None = Field(default=None, gt=0)
    pids_limit: int = Field(default=4096, ge=64)
    disk_quota_bytes: int = Field(default=50 * GiB, gt=0)  # the writable layer, watched during the agent phase
    shm_size_bytes: int = 16 * GiB  # /dev/shm of each sandbox (Docker's 64 MB breaks DataLoader/NCCL)
    unsafe_local: bool = False  # allow non-built-in agents in a sandbox without a guarded network of its own
    pip_cache: bool = True
    # The node's wheel cache, read-only to trials and filled by the harness (reb_ray.sandbox.package_cache):
    # `$REB_RAY_CACHE_DIR/wheels`, else ~/.cache/reb-ray/wheels (with the toolchains, so one variable
    # moves both where a rootless Podman service's user can reach them).
    pip_cache_dir: Path = Field(default_factory=lambda: Path(os.environ.get("REB_RAY_CACHE_DIR") or Path.home() / ".cache" / "reb-ray") / "wheels")
    ca_bundle: Path | None = HOST_CA_BUNDLE if HOST_CA_BUNDLE.exists() else None
    wheelhouses: list[Path] = Field(default_factory=lambda: [NODE_WHEELHOUSE] if NODE_WHEELHOUSE.is_dir() else [])
    toolchains_dir: Path | None = None  # agent toolchains (reb-ray agents install); default ~/.cache/reb-ray/toolchains
    c4_cpu_gloo: bool = False  # test switch: run C4 on CPU with gloo when no GPUs exist
    # Harbor tasks' Dockerfiles: a `FROM` image -> the local image or mirror it is built from here
    # (`--image-map`, reb_ray.harbor.images.map_image: an image as written, an fnmatch pattern, or a
    # `REGISTRY/` prefix -> `MIRROR/`). Where a base image comes from, like a repository mirror: not scored.
    image_map: dict[str, str] = Field(default_factory=dict)

    @field_validator("image_map")
    @classmethod
    def _image_map_names(cls, value: dict[str, str]) -> dict[str, str]:
        for src, dest in value.items():
            if not src.strip() or not dest.strip():
                raise ValueError(f"image_map {src!r} = {dest!r}: both the FROM image and what it maps to must be named")
        return {src.strip(): dest.strip() for src, dest in value.items()}


class NetworkSettings(_Section):
    """`[network]`: the sandboxes' network and egress.

    `name` is the Docker network of the sandboxes. None (the default): reb-ray's own for the
    policy, whose host guard closes the node's services to them (reb_ray.netpolicy.network).
    A name (e.g. "bridge", Docker's default bridge) under `open`: that network as it is,
    unguarded, recorded in the row (`network_host_guard` false) and warned about at sweep start.
    `policy` (`TrialEgress`): `open` (the default: research repositories fetch from many hosts)
    or `registries`: only the hosts of `allow` (host patterns, `DEFAULT_ALLOW`; a list replaces
    the default) and the node's LLM proxy, through a per-trial allow-listing proxy; docker only.
    """

    name: str | None = Field(default=None, min_length=1)
    policy: Literal["open", "registries"] = "open"
    allow: list[str] = Field(default_factory=lambda: list(DEFAULT_ALLOW))

    @field_validator("allow")
    @classmethod
    def _host_patterns(cls, value: list[str]) -> list[str]:
        for pattern in value:
            try:
                parse_pattern(pattern)
            except ValueError as exc:
                raise PydanticCustomError("host_pattern", "{msg}", {"msg": str(exc)}) from None
        return value


class ClusterSettings(_Section):
    """`[cluster]`: the Ray cluster the sweep runs on and how it is shared. Sizes are bytes.

    `address` None: a local Ray. `max_concurrent` None: as many trials as the cluster's slots
    hold. `share_gpus_in_agent_phase` (`PhaseSplit`): agent phases run on CPU slots of GPU nodes
    and see GPUs without holding them; each probe phase leases its node's GPUs exclusively.
    `min_free_bytes`: free disk a node needs for a trial (infra_disk_full below it).
    """

    address: str | None = None
    max_concurrent: int | None = Field(default=None, ge=1)
    share_gpus_in_agent_phase: bool = False
    min_free_bytes: int = 2 * GiB


class LlmSettings(_Section):
    """`[llm]`: LLM agents' budget and retries. Money in USD, times in seconds.

    `max_cost_usd`: the sweep's budget: no new trial is launched once the cost recorded in its
    rows (every attempt, earlier runs included) reaches it; not part of the sweep id, so a
    resume with a larger budget continues the same sweep. An attempt that failed for a rate
    limit or an unavailable endpoint is retried after `retry_backoff_s * 2**(n-1)` seconds for
    its n-th such retry, at least the endpoint's Retry-After, at most `retry_backoff_max_s`.
    `prices_file`: a user price table over the shipped one (reb_ray.llm.prices).
    """

    max_cost_usd: float | None = Field(default=None, gt=0)
    retry_backoff_s: float = Field(default=10.0, ge=0)
    retry_backoff_max_s: float = Field(default=300.0, ge=0)
    prices_file: Path | None = None


class OutputSettings(_Section):
    """`[output]`: where results go and what is kept beside them. Sizes bytes, times seconds.

    `dir`: the output directory (Parquet datasets, artifacts, sweep identities). W&B
    (`WandbLog`): `wandb_project` the driver mirrors rows to (None: none), `wandb_timeout_s` the
    bound on its finish. `keep_environments` (reb_ray.environment.keep): which attempts keep
    their agent's container as an image: none | successes | scored | all. `env_disk_budget_bytes`:
    the node's budget for kept images (their own layers, all sweeps), applied oldest-first after
    each kept commit; None: 50 GiB, or half the Docker data root's free disk when less.
    `verify_exports`: after the sweep, export and rebuild each success not verified before
    (reb_ray.sweep.verify_exports). None of these is part of the sweep id: they change no trial.
    """

    dir: Path = Path("reb-runs")
    wandb_project: str | None = None
    wandb_timeout_s: float = Field(default=60.0, gt=0)
    keep_environments: Literal["none", "successes", "scored", "all"] = "successes"
    env_disk_budget_bytes: int | None = Field(default=None, ge=0)
    verify_exports: bool = False


class ResumeSettings(_Section):
    """`[resume]`: how a run continues what the output directory holds (reb_ray.sweep.identity).

    `rerun`: run trials again although scored. `fresh`: run every trial this sweep has not
    scored itself, reusing none scored by other sweeps of the output directory
    (reb_ray.sweep.trial_identity). `allow_drift`: resume with scoring settings that differ
    from the sweep's first run, recorded in the identity file and each new row's `config_drift`.
    `sweep_id`: the sweep's id (None: derived, `SweepConfig.resolved_sweep_id`).
    """

    rerun: bool = False
    fresh: bool = False
    allow_drift: bool = False
    sweep_id: str | None = None


#: The sections of SweepConfig: name -> model.
SECTIONS: dict[str, type[_Section]] = {"sandbox": SandboxSettings, "network": NetworkSettings,
                                       "cluster": ClusterSettings, "llm": LlmSettings, "output": OutputSettings,
                                       "resume": ResumeSettings}
#: The flat form's keys (SweepConfig before sections; still accepted in sweep.toml, flags and
#: keyword arguments, and the names of the sweep identity's fields) -> (section, field).
FLAT_KEYS: dict[str, tuple[str, str]] = {
    "sandbox": ("sandbox", "provider"), "image_profile": ("sandbox", "image_profile"),
    "cpus_per_trial": ("sandbox", "cpus_per_trial"), "memory_bytes": ("sandbox", "memory_bytes"),
    "pids_limit": ("sandbox", "pids_limit"), "disk_quota_bytes": ("sandbox", "disk_quota_bytes"),
    "shm_size_bytes": ("sandbox", "shm_size_bytes"), "unsafe_local": ("sandbox", "unsafe_local"),
    "pip_cache": ("sandbox", "pip_cache"), "pip_cache_dir": ("sandbox", "pip_cache_dir"),
    "ca_bundle": ("sandbox", "ca_bundle"), "wheelhouses": ("sandbox", "wheelhouses"),
    "toolchains_dir": ("sandbox", "toolchains_dir"), "c4_cpu_gloo": ("sandbox", "c4_cpu_gloo"),
    "image_map": ("sandbox", "image_map"),
    "network": ("network", "name"), "network_policy": ("network", "policy"), "network_allow": ("network", "allow"),
    "address": ("cluster", "address"), "max_concurrent": ("cluster", "max_concurrent"),
    "share_gpus_in_agent_phase": ("cluster", "share_gpus_in_agent_phase"), "min_free_bytes": ("cluster", "min_free_bytes"),
    "max_cost_usd": ("llm", "max_cost_usd"), "llm_retry_backoff_s": ("llm", "retry_backoff_s"),
    "llm_retry_backoff_max_s": ("llm", "retry_backoff_max_s"), "prices_file": ("llm", "prices_file"),
    "output": ("output", "dir"), "wandb_project": ("output", "wandb_project"),
    "wandb_timeout_s": ("output", "wandb_timeout_s"), "keep_environments": ("output", "keep_environments"),
    "env_disk_budget_bytes": ("output", "env_disk_budget_bytes"), "verify_exports": ("output", "verify_exports"),
    "rerun": ("resume", "rerun"), "fresh": ("resume", "fresh"), "allow_drift": ("resume", "allow_drift"),
    "sweep_id": ("resume", "sweep_id"),
}


def is_flat(key: str, value) -> bool:
    """Whether `key: value` is a flat-form setting. Three flat keys share their section's name
    (`sandbox`, `network`, `output`): there a table (dict or section model) is the section and
    anything else (a provider name, a network name or None, a path) the flat setting."""
    if key not in FLAT_KEYS:
        return False
    return key not in SECTIONS or not isinstance(value, (dict, _Section))


def sectioned(data: dict) -> dict:
    """`data` with every flat-form key moved into its section (FLAT_KEYS), the rest as given.

    A section given as a model keeps only the fields set on it, so a flat key beside it is not
    a clash. Raises ValueError naming both spellings when a setting is given flat and in its
    section (which one wins would be a guess), or naming a section that is not a table.
    """
    out: dict = {}
    flat: list[tuple[str, object]] = []
    for key, value in data.items():
        if is_flat(key, value):
            flat.append((key, value))
        elif key in SECTIONS and isinstance(value, _Section):
            out[key] = value.model_dump(exclude_unset=True)
        elif key in SECTIONS and isinstance(value, dict):
            out[key] = dict(value)
        else:
            out[key] = value
    for key, value in flat:
        section, field = FLAT_KEYS[key]
        table = out.setdefault(section, {})
        if not isinstance(table, dict):
            raise ValueError(f"{section!r} must be a table of settings, not {table!r}")
        if field in table:
            raise ValueError(f"{key!r} is given twice: flat and as {section}.{field}; keep one")
        table[field] = value
    return out


class SweepConfig(BaseModel):
    """One sweep's configuration (flags override `--config sweep.toml` values).

    Times are seconds, sizes bytes. The top level says which trials the sweep holds and what
    a trial is given (suite, tasks, agents, trials, the agent's time limit, attempts, the
    inputs a trial reads); the sections say where and how they run: `sandbox`, `network`,
    `cluster`, `llm`, `output`, `resume` (each a `[name]` table of sweep.toml). The flat form
    (every setting at the top level under its FLAT_KEYS name, as before sections) is still
    accepted, so existing sweep.toml files, flags and callers keep working; `flat()` is that
    view, and the sweep id and identity keep its names, so existing outputs resume.

    `resume.sweep_id` defaults to a hash of what defines the trial set (suite, task pattern,
    agents, trials), so rerunning the same sweep resumes it.

    `agents` are agent names in order; each is a key of `agent_specs` (the `[agents.NAME]`
    tables of sweep.toml) or a shorthand `kind`, `kind@model`, `package.module:Class`.
    """

    model_config = ConfigDict(extra="forbid")

    if TYPE_CHECKING:  # flat-form or section keywords, moved and validated at run time (unknown ones fail)
        def __init__(self, **data: Any) -> None: ...

    suite: str = "demo"
    tasks_root: Path | None = None  # directory of suites; default: the bundled tasks/
    tasks: str | None = None
    agent_specs: dict[str, AgentSpec] = Field(default_factory=dict)
    agents: list[str] = Field(default_factory=lambda: ["heuristic", "noop"], min_length=1)
    trials: int = Field(1, ge=1)
    agent_timeout_s: float = Field(1800.0, gt=0)
    max_attempts: int = Field(2, ge=1, description="attempts per trial when infra fails")
    repo_mirrors: list[Path] = Field(default_factory=list)
    assets_dir: Path | None = None  # read-only asset cache for the probes (--assets)
    # A missing asset fails the trial before the agent runs (infra, retried) unless this is set:
    # then the agent runs, only the stages needing the asset are left not_run, the rest is scored.
    skip_missing_assets: bool = False
    sandbox: SandboxSettings = Field(default_factory=lambda: SandboxSettings())
    network: NetworkSettings = Field(default_factory=lambda: NetworkSettings())
    cluster: ClusterSettings = Field(default_factory=lambda: ClusterSettings())
    llm: LlmSettings = Field(default_factory=lambda: LlmSettings())
    output: OutputSettings = Field(default_factory=lambda: OutputSettings())
    resume: ResumeSettings = Field(default_factory=lambda: ResumeSettings())

    @model_validator(mode="before")
    @classmethod
    def _sections_from_flat(cls, data):
        """The flat form's keys moved into their sections (`sectioned`); unknown keys stay at
        the top level, where `extra="forbid"` names them."""
        if not isinstance(data, dict):
            return data
        try:
            return sectioned(data)
        except ValueError as exc:
            raise PydanticCustomError("flat_and_section", "{msg}", {"msg": str(exc)}) from None

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

    @model_validator(mode="after")
    def _policy_needs_docker(self) -> SweepConfig:
        """`registries` needs a sandbox with a network of its own and reb-ray's network. The
        error's context names the field (`field`, `value`) since a model check has no location."""
        provider, network, policy = self.sandbox.provider, self.network.name, self.network.policy
        own_network = provider in PROVIDERS and capabilities_of(provider).own_network
        where = {"field": "network.policy", "value": policy}
        if policy == "registries" and not own_network:
            raise PydanticCustomError("network_policy", "the {sandbox} sandbox shares the node's network, which no "
                                      "proxy can restrict: `registries` needs the docker sandbox",
                                      {"sandbox": provider, **where})
        if policy == "registries" and network in ("host", "none"):
            raise PydanticCustomError("network_policy", "`registries` puts sandboxes on reb-ray's internal network; "
                                      "it cannot be combined with network '{network}'", {"network": network, **where})
        return self

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

    @classmethod
    def field_paths(cls) -> list[str]:
        """Every setting's path: top-level fields by name, section fields as `section.field`."""
        return [f"{name}.{field}" if name in SECTIONS else name for name in cls.model_fields
                for field in (SECTIONS[name].model_fields if name in SECTIONS else [None])]

    def flat(self) -> dict[str, object]:
        """{flat-form key: value}: every setting under its name before sections (FLAT_KEYS).
        The sweep identity and `config_drift` name settings this way, so they stay comparable
        with those of sweeps configured before sections."""
        out = {name: getattr(self, name) for name in type(self).model_fields if name not in SECTIONS}
        out.update({key: getattr(getattr(self, section), field) for key, (section, field) in FLAT_KEYS.items()})
        return out

    def updated(self, **changes) -> SweepConfig:
        """A validated copy with `changes` applied: flat-form keys or top-level fields, or whole
        sections as tables (merged into the current section). Unlike `model_copy(update=...)`,
        a flat key lands in its section and a bad value fails."""
        data = {name: getattr(self, name).model_dump(exclude_unset=False) if name in SECTIONS else getattr(self, name)
                for name in type(self).model_fields}
        for key, value in sectioned(changes).items():
            if key in SECTIONS:
                data[key] = {**data[key], **value}
            else:
                data[key] = value
        return type(self).model_validate(data)

    def agent_spec(self, name: str) -> AgentSpec:
        """The spec of agent `name`: its `[agents.NAME]` table, else the shorthand parsed."""
        return self.agent_specs.get(name) or AgentSpec.from_shorthand(name)

    def resolved_sweep_id(self) -> str:
        """`resume.sweep_id`, or `<suite>-<hash8>` of the trial-defining fields.

        An agent whose spec is more than its name says (a table, extra arguments, limits) adds
        its identity (AgentSpec.identity: kind, model, arguments, limits; never the endpoint). A
        network policy other than `open` adds itself and its allow-list (what a trial may fetch).
        The hashed parts and their keys are those of the flat form, so ids never change.
        """
        if self.resume.sweep_id:
            return self.resume.sweep_id
        parts: list = [self.suite, self.tasks, sorted(self.agents), self.trials, self.sandbox.provider]
        identities = {name: self.agent_spec(name).identity() for name in sorted(set(self.agents))
                      if self.agent_spec(name).identity() != _shorthand_identity(name)}
        if identities:  # kept out otherwise, so sweeps of plain names keep their ids
            parts.append(identities)
        if self.network.policy != "open":  # kept out for `open`, so existing sweeps keep their ids
            parts.append({"network_policy": self.network.policy, "network_allow": sorted(self.network.allow)})
        key = json.dumps(parts, sort_keys=True)
        return f"{_suite_label(self.suite)}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"


def _suite_label(suite: str) -> str:
    """The suite as a sweep id begins: its name; for a Harbor suite (`harbor:PATH`) `harbor-`
    and the directory's name, since an id names directories and PATH holds separators."""
    if not suite.startswith(HARBOR_PREFIX):
        return suite
    name = Path(suite[len(HARBOR_PREFIX):].rstrip("/")).name
    return "harbor-" + ("".join(c if c.isalnum() or c in "._-" else "-" for c in name).strip(".") or "tasks")


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
