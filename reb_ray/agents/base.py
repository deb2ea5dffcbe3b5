"""The agent interface: what builds the environment inside a sandbox.

An agent gets a sandbox holding the repository and must write the report (the paper's
contract, `/opt/scimlopsbench/report.json` by default) describing the interpreter it built.
Built-in agents are `trusted` (they may run in the local sandbox); anything else is not.
"""

from __future__ import annotations

import abc
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from reb_ray.sandbox import ExecResult, Sandbox

if TYPE_CHECKING:
    from reb_ray.agents.prompt import Prompt
    from reb_ray.models.agent import AgentSpec
    from reb_ray.models.task import TaskSpec

REPORT_PATH = "/opt/scimlopsbench/report.json"


@dataclass(frozen=True)
class LlmAccess:
    """How an LLM agent reaches its model from inside the sandbox: through the metering proxy only.

    `base_url` is the node's metering proxy as the sandbox sees it, with no API path
    (`http://172.17.0.1:PORT`): the proxy relays `/v1/messages`, `/v1/responses` and
    `/v1/chat/completions` to the spec's upstream unchanged, so a runner appends what its CLI
    expects (codex and OpenAI-compatible clients: `base_url + "/v1"`; claude's
    ANTHROPIC_BASE_URL: `base_url`). `api_key` is the trial's stand-in key (never the real one:
    the proxy swaps it); the runner puts it in the variable its CLI reads. `model` is the
    spec's model (None: the CLI's default). `max_turns` is the spec's turn limit (None: none).
    """

    base_url: str
    api_key: str
    model: str | None = None
    max_turns: int | None = None


@dataclass
class AgentContext:
    """Where things are in the sandbox, and the agent's limits.

    `timeout_s` is the agent phase's wall-clock limit in seconds; `env` is the only environment
    the agent gets (its own credentials and pip settings, never the harness's secrets).
    `prompt` is the task prompt (reb_ray.agents.prompt); `toolchain` the sandbox path of the
    agent toolchain when it is mounted for this agent (agents with `uses_toolchain`), else None.
    `task` is the trial's task (host side: the built-in `reference` agent reads its stored
    recipe from the task's directory); None outside a trial.
    """

    repo_dir: str
    report_path: str
    timeout_s: float
    env: dict[str, str] = field(default_factory=dict)
    prompt: "Prompt | None" = None
    toolchain: str | None = None
    llm: LlmAccess | None = None  # set for LLM agents (`uses_llm`) by the trial
    task: "TaskSpec | None" = None


@dataclass
class AgentRun:
    """What the agent phase did: exit code (None if unknown), whether the limit fired, seconds,
    bounded output, and token usage when the agent reports it (None = unknown, never 0).

    `report_source` is set when the runner itself wrote the report (`forced_from_output`);
    None lets the trial say `agent_file` or `none` from what it finds. `agent_version` is the
    agent program's version (a CLI's `--version`), None when unknown.
    """

    exit_code: int | None
    timed_out: bool
    wall_time_s: float
    output: str
    limit: str | None = None  # which limit fired ("agent_timeout_s=600"), if any
    input_tokens: int | None = None
    output_tokens: int | None = None
    report_source: str | None = None
    agent_version: str | None = None
    #: The CLI's own usage report (kept beside the proxy's figures as `agent_reported_*`):
    #: keys input_tokens, cached_input_tokens, cache_write_tokens, output_tokens,
    #: reasoning_tokens (int) and cost_usd (float), in the proxy's convention (input includes
    #: cached and cache-written tokens, output includes reasoning); a key the CLI does not
    #: report is absent or None, never 0. None when the CLI reported nothing.
    reported_usage: dict | None = None
    #: The CLI's own transcript (its JSON events, JSON Lines), stored as the trial's trajectory
    #: artifact beside the proxy's request log; None when the CLI leaves none.
    transcript: bytes | None = None

    @classmethod
    def from_exec(cls, result: ExecResult, timeout_s: float, started: float) -> "AgentRun":
        return cls(
            exit_code=result.exit_code,
            timed_out=result.timed_out,
            wall_time_s=time.monotonic() - started,
            output=result.output,
            limit=f"agent_timeout_s={timeout_s:g}" if result.timed_out else None,
        )


class Agent(abc.ABC):
    """Builds an environment in `sandbox` for the repository at `ctx.repo_dir`."""

    name: str = ""
    trusted: bool = False
    #: Names of the driver's environment variables that hold this agent's own credentials
    #: (e.g. "OPENAI_API_KEY"): the only secrets that ever enter its sandbox, masked in outputs.
    credential_env: tuple[str, ...] = ()
    #: Whether the agent phase needs the agent toolchain mounted (reb_ray.agents.toolchain_mount).
    uses_toolchain: bool = False
    #: Whether the agent talks to an LLM: then the trial registers it with the node's metering
    #: proxy and passes `ctx.llm` (reb_ray.llm.proxy).
    uses_llm: bool = False
    #: Whether the agent is known to call no model at all (the built-in baselines `heuristic` and
    #: `noop`, whose code is ours): its trials record 0 LLM requests, tokens and USD, a known
    #: spend, so cost comparisons place it at $0 instead of leaving it out as unknown. Any other
    #: agent without `uses_llm` (a `command` without `base_url`, a class path) may call a model
    #: behind the proxy's back: its spend stays unknown (null).
    calls_no_model: bool = False
    #: Whether the spec must name a model (the CLI has no default of its own).
    requires_model: bool = False
    #: The spec this agent was built from (set by get_agent).
    spec: "AgentSpec | None" = None

    def credential_names(self) -> tuple[str, ...]:
        """The driver's variables passed into the sandbox: `credential_env` plus the spec's `key_env`."""
        key = self.spec.key_env if self.spec is not None else None
        return tuple(dict.fromkeys((*self.credential_env, *([key] if key else []))))

    @abc.abstractmethod
    def run(self, sandbox: Sandbox, ctx: AgentContext) -> AgentRun:
        """Run the agent to completion or to `ctx.timeout_s`. Never raises for agent failures
        (a crash is an AgentRun with a non-zero exit code); raises only for a broken sandbox."""
