"""Agents by name: `get_agent("heuristic")`, `AGENTS` lists the built-in ones."""

from __future__ import annotations

from reb_ray.agents.base import REPORT_PATH, Agent, AgentContext, AgentRun
from reb_ray.errors import RebRayError, UnknownName


def _builtin() -> dict[str, type[Agent]]:
    from reb_ray.agents.heuristic import HeuristicAgent
    from reb_ray.agents.noop import NoopAgent

    return {cls.name: cls for cls in (NoopAgent, HeuristicAgent)}


AGENTS = ("heuristic", "noop")


def get_agent(name: str) -> Agent:
    """A new agent instance by built-in name, or by import path `package.module:ClassName`.

    Raises UnknownName listing the valid names.
    """
    if ":" in name:
        import importlib

        module, _, attr = name.partition(":")
        try:
            cls = getattr(importlib.import_module(module), attr)
        except ImportError as exc:
            raise RebRayError(f"agent {name!r}: cannot import module {module!r} ({exc})") from None
        except AttributeError:
            raise RebRayError(f"agent {name!r}: module {module!r} has no class {attr!r}") from None
        agent = cls()
        agent.name = name
        return agent
    agents = _builtin()
    if name not in agents:
        raise UnknownName("agent", name, list(agents))
    return agents[name]()


__all__ = ["AGENTS", "REPORT_PATH", "Agent", "AgentContext", "AgentRun", "get_agent"]
