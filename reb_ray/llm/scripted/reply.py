"""What a scripted model turn answers, before any API shapes it: text, a tool call, usage.

The shell tool is found among the tools the request offers (claude offers `Bash` with
`{"command"}`, codex `exec_command` with `{"cmd", ...}`, mini-swe-agent `bash` with
`{"command"}`), and the command goes into its command argument by name; an argument typed as
an array (codex's older `shell` tool) gets `["bash", "-lc", COMMAND]`.

codex's `exec_command` returns after `yield_time_ms` (at most 30 s) with the command still
running in a session; a model then waits on it with `write_stdin`. So a scripted command asks
for the longest yield, and `poll_call` is what the endpoint answers while a command still runs:
a model waiting for its install, not a new turn of the script.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from reb_ray.llm.apis import ANTHROPIC, CHAT, RESPONSES
from reb_ray.llm.scripted.script import ScriptUsage, ToolTurn

SHELL_TOOLS = {ANTHROPIC: ("Bash", "bash"), RESPONSES: ("exec_command", "shell", "shell_command", "bash"),
               CHAT: ("bash", "exec_command", "shell")}
COMMAND_ARGUMENTS = ("command", "cmd")
#: codex's cap on one wait of a running command (codex-rs unified exec, MAX_YIELD_TIME_MS).
MAX_YIELD_MS = 30_000
_RUNNING = re.compile(r"Process running with session ID (\d+)")


class ScriptMismatch(Exception):
    """The request does not offer what the turn needs (answered as HTTP 400, with this text)."""


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Reply:
    """One answered turn; `ident` makes every id in it (deterministic across sessions)."""

    text: str
    tool: ToolCall | None
    usage: ScriptUsage
    model: str
    ident: str
    created: int
    chunks: int = 3


def tool_call(turn: ToolTurn, offered: dict[str, dict | None], api: str) -> ToolCall:
    """The call `turn` makes, fitted to `offered` (tool name -> its argument properties)."""
    if turn.arguments is not None:
        if offered and turn.tool not in offered:
            raise ScriptMismatch(f"tool {turn.tool!r} is not among the offered tools {sorted(offered)}")
        return ToolCall(turn.tool or "", dict(turn.arguments))
    name = turn.tool or next((n for n in SHELL_TOOLS[api] if n in offered), None)
    if name is None and not offered:
        name = SHELL_TOOLS[api][0]
    if name is None or (offered and name not in offered):
        raise ScriptMismatch(f"no shell tool among the offered tools {sorted(offered)}; name one with turn.tool")
    properties = offered.get(name) or {}
    argument = next((a for a in COMMAND_ARGUMENTS if a in properties), "command")
    kind = (properties.get(argument) or {}).get("type") if isinstance(properties.get(argument), dict) else None
    value: Any = ["bash", "-lc", turn.command] if kind == "array" else turn.command
    arguments = {argument: value}
    if "yield_time_ms" in properties:
        arguments["yield_time_ms"] = MAX_YIELD_MS
    return ToolCall(name, arguments)


def poll_call(last_tool_result: str | None, offered: dict[str, dict | None]) -> ToolCall | None:
    """A `write_stdin` wait on the command the last tool result says is still running (codex's
    unified exec), or None when nothing runs or the request offers no `write_stdin`."""
    running = _RUNNING.search(last_tool_result or "")
    if running is None or "write_stdin" not in offered:
        return None
    return ToolCall("write_stdin", {"session_id": int(running.group(1)), "chars": "", "yield_time_ms": MAX_YIELD_MS})


def pieces(text: str, n: int) -> list[str]:
    """`text` cut into at most `n` non-empty consecutive pieces (one empty piece for "")."""
    if not text:
        return [""]
    size = -(-len(text) // n)
    return [text[i:i + size] for i in range(0, len(text), size)]
