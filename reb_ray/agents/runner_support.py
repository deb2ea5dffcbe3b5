"""What the Python-CLI runners (mini_swe_agent, nexau) share: the agent's work directory, the
time left of the agent phase, the report forced from the CLI's last words, JSON Lines.

The work directory is beside the repository (`<repo>/../.reb-ray-agent/<kind>`, as the
`command` kind places its prompt file), never inside it, so no tracked file changes; the
runner removes it once it has read what it needs, so the CLI's config and trajectory never
count towards the environment's size.
"""

from __future__ import annotations

import json
import posixpath
import time

from reb_ray.agents.base import AgentContext
from reb_ray.agents.command import last_json_object
from reb_ray.agents.toolchain import TOOLCHAIN_SANDBOX_PATH
from reb_ray.errors import RebRayError
from reb_ray.models.agent import KNOWN_KEY_VARS
from reb_ray.sandbox import Sandbox, UnreadableFile

#: Seconds kept for the runner's own steps (reading the trajectory, forcing the report) after
#: the CLI's exec, within the agent phase's `timeout_s`.
AFTER_CLI_S = 5.0


def work_dir(ctx: AgentContext, kind: str) -> str:
    """`<repo>/../.reb-ray-agent/<kind>`: where a runner writes the CLI's config and finds its output."""
    return posixpath.normpath(f"{ctx.repo_dir}/../.reb-ray-agent/{kind}")


def time_left(ctx: AgentContext, started: float) -> float:
    """Seconds of `ctx.timeout_s` left for the CLI itself (at least 1 s)."""
    return max(1.0, ctx.timeout_s - (time.monotonic() - started) - AFTER_CLI_S)


def cli_env(agent, ctx: AgentContext, extra: dict[str, str]) -> dict[str, str]:
    """The CLI's environment: the spec's `env`, the trial's `ctx.env` without the agent's
    credential variables (an LLM agent reaches its model only through the proxy with the
    stand-in key: the real key must never enter the sandbox, whatever the caller passed), and
    `extra` (the runner's own variables, which win). The provider key variables reb-ray knows
    (`KNOWN_KEY_VARS`: OPENAI_API_KEY, ANTHROPIC_API_KEY, ...) are dropped too: a CLI reads them
    on its own, so one the caller left in `ctx.env` under another name would reach the sandbox."""
    drop = set(agent.credential_names()) | set(KNOWN_KEY_VARS)  # a provider key under any known name, too
    spec_env = agent.spec.env if agent.spec is not None else {}
    return {**spec_env, **{k: v for k, v in ctx.env.items() if k not in drop}, **extra}


def require_llm(ctx: AgentContext, agent_name: str, kind: str, sandbox: Sandbox):
    """`ctx.llm` with a model, or RebRayError naming what is missing (a harness or spec error,
    raised before any agent time is spent). The Python CLIs' venvs are built for the toolchain's
    sandbox path, so they run only in a sandbox that mounts the toolchain there (the docker one)."""
    if not sandbox.capabilities.mounts:
        raise RebRayError(f"agent {agent_name!r}: kind {kind} runs in the docker sandbox only (its toolchain "
                          f"venv is built for {TOOLCHAIN_SANDBOX_PATH})")
    if ctx.llm is None:
        raise RebRayError(f"agent {agent_name!r}: the {kind} runner needs the trial's LLM access (ctx.llm)")
    if not ctx.llm.model:
        raise RebRayError(f"agent {agent_name!r}: kind {kind} needs a model (`{kind}@MODEL` or `model = ...` in its table)")
    return ctx.llm


def read_optional(sandbox: Sandbox, path: str) -> bytes | None:
    """The sandbox file's bytes, or None when it does not exist or is not a regular file within
    Sandbox.read_bytes's default limit (the agent can plant a symlink or FIFO at any path)."""
    try:
        return sandbox.read_bytes(path)
    except (FileNotFoundError, UnreadableFile):
        return None


def force_report(sandbox: Sandbox, report_path: str, candidates: list[str | None]) -> bool:
    """When the agent wrote no report file, write the first report found in `candidates`
    (its last JSON object, see command.last_json_object) to `report_path`. True when written:
    the row's report_source is then `forced_from_output`."""
    if read_optional(sandbox, report_path) is not None:
        return False
    for text in candidates:
        report = last_json_object(text) if text else None
        if report is not None:
            sandbox.write_bytes(report_path, (json.dumps(report, indent=2) + "\n").encode())
            return True
    return False


def remove_dir(sandbox: Sandbox, *paths: str) -> None:
    """Remove the runner's work directory (and the CLI's scratch `paths`) in one exec; best
    effort: a failure leaves a few files behind."""
    try:
        sandbox.exec(["rm", "-rf", "--", *paths], timeout=60)
    except RebRayError:
        pass


def jinja_literal(text: str) -> str:
    """`text` as a literal inside a Jinja template (both CLIs render their system prompt with
    Jinja; our prompt's braces must reach the model as written)."""
    return "{% raw %}" + text.replace("{% endraw %}", "{% endraw %}{{ '{% endraw %}' }}{% raw %}") + "{% endraw %}"


def json_lines(records: list[dict]) -> bytes:
    """One compact JSON object per line."""
    return b"".join(json.dumps(r, separators=(",", ":"), default=str).encode() + b"\n" for r in records)
