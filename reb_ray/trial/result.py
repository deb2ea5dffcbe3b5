"""One attempt's result as typed parts, and the one place it becomes rows (`flatten`).

A trial attempt's phases each fill a part of its `AttemptResult` (docs/architecture.md, "The
life of a trial"): the recorder its identity, `prepare` the sandbox it set up, the agent phase
its `AgentPhaseResult` (and the attempt's `LlmUsage` from the node's metering proxy), the steps
between the phases their `BetweenPhasesResult`, the environment phase its
`EnvironmentCapture`, the probe phase its `ProbePhaseResult` (timings and the stage verdicts),
the attempt's closing steps its `NetworkUse` (the egress proxy) and its `Settlement` (status
and who failed). A phase sets typed attributes of its own part; nothing in the trial path
writes a trials-row key.

`flatten(result)` turns the parts into the `trials` row and the `stages` rows: the only place
the trials row of a live attempt is made. A part's field is named as the column it fills (one
spelling: a typo is an AttributeError at the phase, never a silently extra column), except
where a part holds something that is no column (the verdicts, the agent's own account of its
report). Every field is None until its phase knows it: unknown stays null, never 0.

A stage row is a typed `StageRow` (made by `TrialRecorder.stage`, or from a stored row by a
re-grade or a re-probe) until `StageRow.columns` makes it a dict: the only place a stage row
becomes one, for `flatten` and for a re-grade's rows.

The trials row `flatten` makes holds every TRIALS_SCHEMA column but `DRIVER_COLUMNS`, the
columns the sweep's driver or a copied row sets after the attempt returned.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field, fields
from typing import Any

from reb_ray.grading.verdict import StageVerdict
from reb_ray.grading.vocabulary import Category, Stage, Status, category, plain

#: Trials-row columns no live attempt fills; who sets them instead:
#: - schema_version: the Parquet sink, on every row it writes (reb_ray.results.rows);
#: - config_drift, trial_identity: the sweep's driver when the attempt's row reaches it (reb_ray.sweep.run);
#: - reused_from: a row copied from another sweep (resume by trial identity, a re-probe); null on a live attempt.
DRIVER_COLUMNS = ("schema_version", "config_drift", "trial_identity", "reused_from")


class _Part:
    """A part of an attempt's result (or a `StageRow`): a dataclass whose column fields are
    named as their columns."""

    __slots__ = ()  # with the parts' own slots: setting a name no field has raises AttributeError
    #: Fields that are no column (a part's own bookkeeping).
    _NOT_COLUMNS: tuple[str, ...] = ()

    def set(self, **columns: Any) -> None:
        """Set column fields by name, for a helper that answers with columns (e.g.
        `TrialLlm.finish`, `TrialEgress.close`). Raises KeyError naming a column the part lacks."""
        names = self.column_names()
        for name, value in columns.items():
            if name not in names:
                raise KeyError(f"{type(self).__name__} has no column {name!r}")
            setattr(self, name, value)

    @classmethod
    def column_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls) if f.name not in cls._NOT_COLUMNS)  # type: ignore[arg-type]

    def columns(self) -> dict[str, Any]:
        """This part's columns."""
        return {name: getattr(self, name) for name in self.column_names()}


@dataclass(slots=True)
class AttemptIdentity(_Part):
    """Which attempt this is and under which settings, known when it starts (`TrialRecorder`);
    `finished_at` and `trial_wall_time_s` (seconds) when it ends. `c0_total` is the task's C0
    baseline import total (C0's denominator)."""

    sweep_id: str | None = None
    trial_id: str | None = None
    attempt: int | None = None
    trial_index: int | None = None
    task_id: str | None = None
    suite: str | None = None
    agent: str | None = None
    agent_kind: str | None = None
    agent_model: str | None = None
    node: str | None = None
    sandbox_provider: str | None = None
    c0_total: int | None = None
    rerun: bool | None = None
    prompt_sha256: str | None = None
    sweep_max_cost_usd: float | None = None
    network_policy: str | None = None
    gpu_sharing: bool | None = None
    started_at: dt.datetime | None = None
    finished_at: dt.datetime | None = None
    trial_wall_time_s: float | None = None


@dataclass(slots=True)
class SandboxSetup(_Part):
    """What `prepare` set up: the pinned commit placed, the agent sandbox's limits (bytes,
    processes) and whether its engine enforces them (null for the local provider)."""

    repo_commit: str | None = None
    sandbox_shm_bytes: int | None = None
    sandbox_limits_enforced: bool | None = None
    sandbox_pids_limit: int | None = None
    sandbox_memory_bytes: int | None = None
    sandbox_disk_quota_bytes: int | None = None


@dataclass(slots=True)
class AgentPhaseResult(_Part):
    """The agent phase (`run_agent_phase`): the agent's exit, wall time (seconds) and output's
    tail, the limit that ended it (its own, or the sandbox's: sandbox_limit_fired), the sandbox
    watch's counts, its full log, and the ATIF trajectory written when the attempt closes.

    `report_source` is the agent's own account of who wrote the report (e.g. forced from its
    output); the row's column is the between-phases step's verdict when that step ran
    (`BetweenPhasesResult.report_source`), else this."""

    _NOT_COLUMNS = ("report_source",)

    agent_exit_code: int | None = None
    agent_timed_out: bool | None = None
    agent_wall_time_s: float | None = None
    agent_output_tail: str | None = None
    agent_limit: str | None = None
    agent_log_path: str | None = None
    agent_version: str | None = None
    report_source: str | None = None
    sandbox_limit_fired: str | None = None
    sandbox_oom_kills: int | None = None
    sandbox_disk_peak_bytes: int | None = None
    atif_path: str | None = None


@dataclass(slots=True)
class LlmUsage(_Part):
    """The attempt's LLM use as the node's metering proxy counted it (`TrialLlm.finish`), the
    agent's own usage report beside it, and where the transcript and request log are. All null
    for an agent without an LLM; zeros only for one known to call no model."""

    llm_requests: int | None = None
    input_tokens: int | None = None
    cached_input_tokens: int | None = None
    cache_write_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None
    cost_usd: float | None = None
    cost_source: str | None = None
    price_version: str | None = None
    llm_model: str | None = None
    llm_rate_limited: int | None = None
    llm_unavailable: int | None = None
    llm_auth_failures: int | None = None
    llm_budget_failures: int | None = None
    llm_in_flight: int | None = None
    llm_failure_category: str | None = None
    llm_last_error: str | None = None
    llm_retry_after_s: float | None = None
    agent_reported_input_tokens: int | None = None
    agent_reported_output_tokens: int | None = None
    agent_reported_cost_usd: float | None = None
    trajectory_path: str | None = None
    llm_log_path: str | None = None


@dataclass(slots=True)
class BetweenPhasesResult(_Part):
    """The steps between the phases (`run_between_phases`): the agent's leftover processes
    stopped, the report read (its status, interpreter and who wrote it), the agent's changes to
    tracked files and their restore to the pinned commit. Null where a step could not tell."""

    leftover_processes: int | None = None
    leftover_commands: list[str] | None = None
    report_status: str | None = None
    report_python_path: str | None = None
    report_source: str | None = None
    repo_modified: bool | None = None
    repo_modified_files: list[str] | None = None
    repo_head_moved: bool | None = None
    repo_restored: bool | None = None
    repo_restored_files: list[str] | None = None


@dataclass(slots=True)
class OutsideView(_Part):
    """What the harness observed from outside the sandbox, where no code of the agent can
    reach (`reb_ray.trial.process_audit`, `reb_ray.trial.repo_outside`): processes not started
    by the harness in the sandbox's process list (its cgroup, as the engine lists it) when the
    probe phase began and after its last stage, with their command lines; tracked files whose
    content, read from outside, differed from the harness's own copy of the pinned commit
    after the in-sandbox restore (put back from that copy), and those that changed during the
    probe phase; and the seconds these reads took. Null: the provider cannot observe it."""

    probe_processes_before: int | None = None
    probe_processes_after: int | None = None
    probe_process_commands: list[str] | None = None
    repo_outside_restored: list[str] | None = None
    repo_probe_changed: list[str] | None = None
    outside_check_s: float | None = None


@dataclass(slots=True)
class NetworkUse(_Part):
    """The attempt's network (`TrialEgress.close`): the Docker network the sandbox joined,
    whether the host guard closed the node's services to it, and under the `registries` policy
    the connections its egress proxy refused and that proxy's log."""

    sandbox_network: str | None = None
    network_host_guard: bool | None = None
    network_denied_count: int | None = None
    network_log_path: str | None = None


@dataclass(slots=True)
class EnvironmentCapture(_Part):
    """What the environment phase kept of the agent's environment (`EnvironmentPhase`): the
    manifest (path, sha256 digest, bytes, seconds) or why none was taken, and the committed
    image (kept or not under the policy, its id, tag, bytes, commit seconds) with the node's
    disk budget applied after it."""

    env_manifest_path: str | None = None
    env_manifest_digest: str | None = None
    env_manifest_bytes: int | None = None
    env_capture_s: float | None = None
    env_capture_error: str | None = None
    env_keep_policy: str | None = None
    env_kept: bool | None = None
    env_image_id: str | None = None
    env_image_tag: str | None = None
    env_image_bytes: int | None = None
    env_image_total_bytes: int | None = None
    env_commit_s: float | None = None
    env_keep_error: str | None = None
    env_disk_budget_bytes: int | None = None
    env_evicted: list[str] | None = None
    env_node_kept_bytes: int | None = None

    @property
    def capture_tried(self) -> bool:
        """Whether a capture ran to an end, taken or failed (both record its seconds)."""
        return self.env_capture_s is not None


@dataclass(slots=True)
class HardwareFingerprint(_Part):
    """The node's hardware and container runtime (`reb_ray.environment.fingerprint`)."""

    gpu_model: str | None = None
    gpu_count: int | None = None
    gpu_memory_bytes: int | None = None
    gpu_compute_capability: str | None = None
    gpu_driver_version: str | None = None
    cuda_driver_version: str | None = None
    container_runtime: str | None = None
    container_runtime_version: str | None = None
    cpu_model: str | None = None
    cpu_count: int | None = None
    kernel: str | None = None


@dataclass(slots=True)
class ProbePhaseResult(_Part):
    """The probe phase: the GPUs it was given, the toolbox that graded it, its seconds (and in
    a GPU-sharing sweep the commit's seconds and bytes and the lease's wait), the wheels it
    added to the node's cache, and the stage verdicts in the order they were recorded (each
    sets its own trials-row columns, `StageVerdict.trial_columns`; a later one of the same stage wins)."""

    _NOT_COLUMNS = ("verdicts",)

    gpus_assigned: int | None = None
    probe_toolbox: str | None = None
    probe_wall_time_s: float | None = None
    probe_image_commit_s: float | None = None
    probe_image_bytes: int | None = None
    probe_gpu_wait_s: float | None = None
    pip_cache_filled: int | None = None
    verdicts: list[StageVerdict] = field(default_factory=list)

    def grade_columns(self) -> dict[str, Any]:
        """The trials-row columns the verdicts set, later ones over earlier ones."""
        columns: dict[str, Any] = {}
        for verdict in self.verdicts:
            columns.update(verdict.trial_columns())
        return columns


@dataclass(slots=True)
class HarborResult(_Part):
    """A Harbor task's attempt (reb_ray.harbor.sweep): the reward its verifier wrote and every
    metric of reward.json (a JSON object, keys sorted), the image the sandbox ran and the seconds
    spent getting it. All null for reb-ray's own tasks, and the reward null when no usable file
    was written."""

    reward: float | None = None
    rewards: str | None = None
    harbor_image: str | None = None
    harbor_build_s: float | None = None


@dataclass(slots=True)
class Settlement(_Part):
    """Who failed the attempt, if anyone (`settle_rows`, or an infra error): status, owner,
    category and reason, and the stages left unmeasured for a missing asset."""

    status: str | None = None
    failure_owner: str | None = None
    failure_category: str | None = None
    failure_reason: str | None = None
    stages_missing_assets: int | None = None

    def note(self, text: str) -> None:
        """Append `text` (e.g. a sandbox that could not be removed) to the failure reason."""
        self.failure_reason = (self.failure_reason or "") + text


@dataclass(slots=True, kw_only=True)
class StageRow(_Part):
    """One `stages` row: a field per STAGES_SCHEMA column, in the schema's order, null where
    unknown. `stage`, `status` and `failure_category` are the grading vocabulary's enums (a
    value that is no member raises ValueError, an unknown category UnknownCategory, where the
    row is made); `columns` hands them on as plain strings, so pyarrow never sees an enum.

    `schema_version` is the Parquet sink's: null on a live attempt's row (the sink writes its
    own version), the stored one on a row read back (a re-grade, a re-probe). Sizes are bytes,
    durations seconds; the evidence columns are `TrialRecorder.stage`'s."""

    schema_version: int | None = None
    sweep_id: str | None = None
    trial_id: str | None = None
    attempt: int | None = None
    task_id: str | None = None
    agent: str | None = None
    stage: Stage
    status: Status
    reason: str | None = None
    exit_code: int | None = None
    timed_out: bool | None = None
    failure_category: Category | None = None
    duration_s: float | None = None
    command: str | None = None
    log_head: str | None = None
    log_tail: str | None = None
    raw: str | None = None
    started_at: dt.datetime | None = None
    output_truncated: bool | None = None
    output_dropped_bytes: int | None = None
    log_pattern: str | None = None
    log_pattern_matched: bool | None = None
    side_logs: list[dict] | None = None
    log_path: str | None = None
    log_cut_bytes: int | None = None
    witness_status: str | None = None
    witness_interpreters: int | None = None
    witness_interpreter: str | None = None
    witness_repo_files: int | None = None
    witness_observed: str | None = None

    def __post_init__(self) -> None:
        self.stage, self.status = Stage(self.stage), Status(self.status)
        if self.failure_category is not None:
            self.failure_category = category(self.failure_category)

    def set(self, **columns: Any) -> None:
        """Set columns by name (`_Part.set`), the enums checked again."""
        _Part.set(self, **columns)
        self.__post_init__()

    def columns(self) -> dict[str, Any]:
        """The row as the sink takes it: every column, enums as their plain strings."""
        return {name: plain(getattr(self, name)) for name in self.column_names()}


@dataclass
class AttemptResult:
    """An attempt's result, one part per phase (module docstring), and its stage rows (made by
    `TrialRecorder.stage`, in the order the stages ended)."""

    identity: AttemptIdentity = field(default_factory=AttemptIdentity)
    setup: SandboxSetup = field(default_factory=SandboxSetup)
    agent: AgentPhaseResult = field(default_factory=AgentPhaseResult)
    llm: LlmUsage = field(default_factory=LlmUsage)
    between: BetweenPhasesResult = field(default_factory=BetweenPhasesResult)
    network: NetworkUse = field(default_factory=NetworkUse)
    environment: EnvironmentCapture = field(default_factory=EnvironmentCapture)
    hardware: HardwareFingerprint = field(default_factory=HardwareFingerprint)
    probe: ProbePhaseResult = field(default_factory=ProbePhaseResult)
    settlement: Settlement = field(default_factory=Settlement)
    outside: OutsideView = field(default_factory=OutsideView)
    harbor: HarborResult = field(default_factory=HarborResult)
    stages: list[StageRow] = field(default_factory=list)

    def parts(self) -> tuple[_Part, ...]:
        return (self.identity, self.setup, self.agent, self.llm, self.between, self.network, self.environment,
                self.hardware, self.probe, self.settlement, self.outside, self.harbor)

    def trials_row(self) -> dict[str, Any]:
        """The trials row (`flatten`'s first half)."""
        row: dict[str, Any] = {}
        for part in self.parts():
            row.update(part.columns())
        row.update(self.probe.grade_columns())
        row["report_source"] = (self.between.report_source if self.between.report_source is not None
                                else self.agent.report_source)
        return row


def flatten(result: AttemptResult) -> tuple[dict[str, Any], list[dict]]:
    """(the `trials` row, the `stages` rows) of `result`: every TRIALS_SCHEMA column but
    DRIVER_COLUMNS, null where unknown, and every STAGES_SCHEMA column of each stage row in
    the order recorded (`StageRow.columns`; new dicts, so changing them leaves `result` as it was)."""
    return result.trials_row(), [stage.columns() for stage in result.stages]


__all__ = ["DRIVER_COLUMNS", "AgentPhaseResult", "AttemptIdentity", "AttemptResult", "BetweenPhasesResult",
           "EnvironmentCapture", "HarborResult", "HardwareFingerprint", "LlmUsage", "NetworkUse", "OutsideView", "ProbePhaseResult", "SandboxSetup",
           "Settlement", "StageRow", "flatten"]
