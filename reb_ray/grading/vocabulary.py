"""The grading vocabulary as enums: stages, statuses, failure owners and failure categories.

Each member's value is the string the rows have always held, so a `StrEnum` member compares
equal to the stored string and the Parquet files and the reports read the same as before. What
goes into a row is always the plain string (`plain`): pyarrow then sees `str`, never an enum.

Every failure category names its owner (`Category.X.owner`), decided here once and for all:

- `agent`: the environment the agent built failed, or it left nothing to measure with;
- `hardware`: the node had too few GPUs for the stage (never the agent's, never retried);
- `infra`: the harness, the node, the network or the LLM endpoint failed (the attempt is an
  infra_error, retried, never scored). Every infra category starts with `infra_`.

`owner_of` of a string that is no member raises `UnknownCategory`: a misspelt category is a bug
to fix, never a failure silently charged to the agent.
"""

from __future__ import annotations

from enum import Enum, StrEnum
from typing import Any

from reb_ray.errors import RebRayError


class Stage(StrEnum):
    """The stage rows of an attempt, in the order they are written."""

    AGENT = "agent"
    REPORT = "report"
    STARTUP = "startup"
    C0 = "c0"
    C1 = "c1"
    C2 = "c2"
    C3 = "c3"
    C4 = "c4"
    C5 = "c5"
    ENV_SIZE = "env_size"
    # A Harbor task's verifier (its tests/test.sh) and the reward it wrote (reb_ray.harbor).
    VERIFIER = "verifier"


class Status(StrEnum):
    """A stage's status: it ran and passed, ran and did not pass, does not apply to the task
    (the spec says so), or was not measured (who is to blame is in its failure category)."""

    SUCCESS = "success"
    FAILURE = "failure"
    SKIPPED = "skipped"
    NOT_RUN = "not_run"


class TrialStatus(StrEnum):
    """An attempt's status: scored (its stages count), infra_error (retried, never scored), or
    interrupted (the sweep stopped while it ran)."""

    SCORED = "scored"
    INFRA_ERROR = "infra_error"
    INTERRUPTED = "interrupted"


class Owner(StrEnum):
    """Who a failure belongs to (module docstring)."""

    AGENT = "agent"
    HARDWARE = "hardware"
    INFRA = "infra"


class Category(StrEnum):
    """Every failure category a stage or an attempt can carry, each with its owner.

    The rules that choose among them live with their graders: a failed command's output
    (`classify_failure`), C2's alignment (`grade_c2`), what left a stage unmeasured
    (`reb_ray.grading.unmeasured`), the witness (`grade_witness`), the sandbox's limits, the
    LLM endpoint's answers, and the harness's own errors (`InfraError`).
    """

    owner: Owner

    def __new__(cls, value: str, owner: Owner) -> Category:
        member = str.__new__(cls, value)
        member._value_ = value
        member.owner = owner
        return member

    # A failed command stage (C1, C3, C4), from the error that ended it.
    DEPS = "deps", Owner.AGENT
    SYSTEM_DEPS = "system_deps", Owner.AGENT
    NATIVE_EXT_ABI = "native_ext_abi", Owner.AGENT
    MISSING_COMPILED_EXT = "missing_compiled_ext", Owner.AGENT
    ASSETS = "assets", Owner.AGENT
    OOM = "oom", Owner.AGENT
    TIMEOUT = "timeout", Owner.AGENT
    ENTRYPOINT_NOT_FOUND = "entrypoint_not_found", Owner.AGENT
    RUNTIME = "runtime", Owner.AGENT
    # A command that succeeded without a valid witness of the pinned code in the reported interpreter.
    UNVERIFIED_RUN = "unverified_run", Owner.AGENT
    # Observed from outside the sandbox: a process of the agent alive when the probe phase
    # began that could not be stopped, or a tracked file that changed while the stages ran.
    AGENT_PROCESS_IN_PROBES = "agent_process_in_probes", Owner.AGENT
    REPO_CHANGED_IN_PROBES = "repo_changed_in_probes", Owner.AGENT
    # A command that succeeded while running installed code the harness could not match with
    # what was published (reb_ray.grading.installed): a modified distribution, a module no
    # verified distribution owns, start-up code (.pth, sitecustomize) nobody verified.
    DIST_MODIFIED = "dist_modified", Owner.AGENT
    UNOWNED_MODULE = "unowned_module", Owner.AGENT
    STARTUP_HOOK = "startup_hook", Owner.AGENT
    # C2: the framework build, the driver and the GPU do not agree.
    NO_FRAMEWORK = "no_framework", Owner.AGENT
    CPU_ONLY_BUILD = "cpu_only_build", Owner.AGENT
    DRIVER_TOO_OLD = "driver_too_old", Owner.AGENT
    NO_DEVICE = "no_device", Owner.AGENT
    ARCH_NOT_SUPPORTED = "arch_not_supported", Owner.AGENT
    KERNEL_FAILED = "kernel_failed", Owner.AGENT
    # The agent left nothing to measure with.
    MISSING_REPORT = "missing_report", Owner.AGENT
    INVALID_REPORT = "invalid_report", Owner.AGENT
    SANDBOX_BROKEN_BY_AGENT = "sandbox_broken_by_agent", Owner.AGENT
    INTERPRETER_MISSING = "interpreter_missing", Owner.AGENT
    INTERPRETER_BROKEN = "interpreter_broken", Owner.AGENT
    # A probe record written in the agent's environment that no grader can read.
    PROBE_RECORD_INVALID = "probe_record_invalid", Owner.AGENT
    # A sandbox limit ended the agent phase (OOM is `oom` above).
    PIDS_LIMIT = "pids_limit", Owner.AGENT
    DISK_QUOTA = "disk_quota", Owner.AGENT
    # A Harbor task's verifier left no reward file, or one that is not finite numbers; the
    # oracle of a task without solution/solve.sh (reb_ray.harbor.trial).
    REWARD_MISSING = "reward_missing", Owner.AGENT
    REWARD_INVALID = "reward_invalid", Owner.AGENT
    NO_SOLUTION = "no_solution", Owner.AGENT
    # Too few GPUs for the stage.
    INSUFFICIENT_HARDWARE = "insufficient_hardware", Owner.HARDWARE
    # The infrastructure: a stage's run hit a node or cache problem ...
    INFRA_SHM = "infra_shm", Owner.INFRA
    INFRA_DISK_FULL = "infra_disk_full", Owner.INFRA
    INFRA_ASSETS = "infra_assets", Owner.INFRA
    INFRA_ASSETS_MISSING = "infra_assets_missing", Owner.INFRA
    INFRA_PROBE_MISCONFIGURED = "infra_probe_misconfigured", Owner.INFRA
    # ... or the harness raised it itself.
    INFRA_DAEMON = "infra_daemon", Owner.INFRA
    INFRA_CLONE = "infra_clone", Owner.INFRA
    INFRA_SANDBOX = "infra_sandbox", Owner.INFRA
    INFRA_TOOLBOX = "infra_toolbox", Owner.INFRA
    INFRA_TOOLCHAIN = "infra_toolchain", Owner.INFRA
    INFRA_NODE = "infra_node", Owner.INFRA
    INFRA_HARNESS = "infra_harness", Owner.INFRA
    INFRA_NETWORK_GUARD = "infra_network_guard", Owner.INFRA
    # The LLM endpoint (reb_ray.llm.failures) and the node's proxy to it.
    INFRA_LLM_RATE_LIMIT = "infra_llm_rate_limit", Owner.INFRA
    INFRA_LLM_UNAVAILABLE = "infra_llm_unavailable", Owner.INFRA
    INFRA_LLM_AUTH = "infra_llm_auth", Owner.INFRA
    INFRA_LLM_BUDGET = "infra_llm_budget", Owner.INFRA
    INFRA_LLM_PROXY = "infra_llm_proxy", Owner.INFRA


class UnknownCategory(RebRayError, ValueError):
    """A failure category that is no member of `Category`."""


def category(value: str) -> Category:
    """The `Category` member of `value`. Raises UnknownCategory naming the value."""
    try:
        return Category(value)
    except ValueError:
        raise UnknownCategory(f"unknown failure category {value!r}: not a member of reb_ray.grading.vocabulary.Category "
                              f"(add it there, with its owner)") from None


def owner_of(value: str | None) -> Owner | None:
    """Who failure category `value` belongs to; None for no failure (`value` None).

    Raises UnknownCategory for a string that is no category: never defaults to the agent."""
    return None if value is None else category(value).owner


def plain(value: Any) -> Any:
    """`value` as a row holds it: an enum member becomes its plain string value."""
    return value.value if isinstance(value, Enum) else value


__all__ = ["Category", "Owner", "Stage", "Status", "TrialStatus", "UnknownCategory", "category", "owner_of", "plain"]
