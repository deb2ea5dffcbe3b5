"""Agents from specs: `get_agent(spec)` (or a name: `get_agent("heuristic")`); `AGENTS` lists the
built-in kinds that run today."""

from __future__ import annotations

from pydantic import ValidationError
from pydantic_core import PydanticCustomError

from reb_ray.agents.base import REPORT_PATH, Agent, AgentContext, AgentRun
from reb_ray.errors import RebRayError
from reb_ray.models.agent import KINDS, LLM_KINDS, AgentSpec


def _builtin() -> dict[str, type[Agent]]:
    from reb_ray.agents.heuristic import HeuristicAgent
    from reb_ray.agents.noop import NoopAgent
    from reb_ray.agents.reference import ReferenceAgent

    return {cls.name: cls for cls in (NoopAgent, HeuristicAgent, ReferenceAgent)}


AGENTS = ("heuristic", "noop", "reference")


def _from_class_path(path: str) -> Agent:
    import importlib

    module, _, attr = path.partition(":")
    try:
        cls = getattr(importlib.import_module(module), attr)
    except ImportError as exc:
        raise RebRayError(f"agent {path!r}: cannot import module {module!r} ({exc})") from None
    except AttributeError:
        raise RebRayError(f"agent {path!r}: module {module!r} has no class {attr!r}") from None
    return cls()


#: The runner of each LLM kind: one module per kind in reb_ray/agents/, one class in it.
LLM_RUNNERS = {"codex": "codex:CodexAgent", "claude_code": "claude_code:ClaudeCodeAgent",
               "mini_swe_agent": "mini_swe_agent:MiniSweAgent", "nexau": "nexau:NexauAgent"}


def _llm_runner(spec: AgentSpec) -> Agent:
    import importlib

    module, _, cls = LLM_RUNNERS[spec.kind].partition(":")
    return getattr(importlib.import_module(f"reb_ray.agents.{module}"), cls)()


def get_agent(spec: AgentSpec | str) -> Agent:
    """A new agent for `spec` (a name is read as shorthand: `kind`, `kind@model`, `package.module:Class`).

    Kinds: heuristic, noop, reference (replays the task's stored reference recipe), command, the LLM CLI kinds (codex, claude_code, mini_swe_agent,
    nexau: one runner module each, `LLM_RUNNERS`), or a class path. An unknown kind, or a class
    path that does not import, raises RebRayError.
    """
    if isinstance(spec, str):
        try:
            spec = AgentSpec.from_shorthand(spec)
        except (ValidationError, PydanticCustomError) as exc:
            msg = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else exc.message()
            raise RebRayError(f"agent {spec!r}: {msg}") from None
    if ":" in spec.kind:
        agent = _from_class_path(spec.kind)
    elif spec.kind in AGENTS:
        agent = _builtin()[spec.kind]()
    elif spec.kind == "command":
        from reb_ray.agents.command import CommandAgent

        agent = CommandAgent()
    elif spec.kind in LLM_KINDS:
        agent = _llm_runner(spec)
    else:  # AgentSpec validates kinds; a hand-made spec may still be wrong
        raise RebRayError(f"agent {spec.name!r}: unknown kind {spec.kind!r}; valid: {', '.join(KINDS)}")
    agent.name = spec.name
    agent.spec = spec
    return agent


__all__ = ["AGENTS", "REPORT_PATH", "Agent", "AgentContext", "AgentRun", "get_agent"]
