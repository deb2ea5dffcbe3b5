"""The agent interface: what builds the environment inside a sandbox.

An agent gets a sandbox holding the repository and must write the report (the paper's
contract, `/opt/scimlopsbench/report.json` by default) describing the interpreter it built.
Built-in agents are `trusted` (they may run in the local sandbox); anything else is not.
"""

from __future__ import annotations

import abc
import time
from dataclasses import dataclass, field

from reb_ray.sandbox import ExecResult, Sandbox

REPORT_PATH = "/opt/scimlopsbench/report.json"


@dataclass
class AgentContext:
    """Where things are in the sandbox, and the agent's limits.

    `timeout_s` is the agent phase's wall-clock limit in seconds; `env` is the only environment
    the agent gets (its own credentials and pip settings, never the harness's secrets).
    """

    repo_dir: str
    report_path: str
    timeout_s: float
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class AgentRun:
    """What the agent phase did: exit code (None if unknown), whether the limit fired, seconds,
    bounded output, and token usage when the agent reports it (None = unknown, never 0)."""

    exit_code: int | None
    timed_out: bool
    wall_time_s: float
    output: str
    limit: str | None = None  # which limit fired ("agent_timeout_s=600"), if any
    input_tokens: int | None = None
    output_tokens: int | None = None

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

    @abc.abstractmethod
    def run(self, sandbox: Sandbox, ctx: AgentContext) -> AgentRun:
        """Run the agent to completion or to `ctx.timeout_s`. Never raises for agent failures
        (a crash is an AgentRun with a non-zero exit code); raises only for a broken sandbox."""
