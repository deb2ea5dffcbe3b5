"""The commands an agent ran, read back from its stored transcript (for `reb-ray trial show`
and the suspicious-action list: a trial is debuggable without running it again).

A transcript is JSON Lines (AgentRun.transcript, stored as `trajectory.jsonl.gz`). Three
shapes are read, one event per line, others ignored:

- reb-ray's own, for any agent that writes one: `{"type": "command", "command": "...",
  "exit_code": 0, "output": "..."}`.
- codex `exec --json`: `{"type": "item.completed", "item": {"type": "command_execution",
  "command": "...", "exit_code": 0, "aggregated_output": "..."}}`.
- claude `-p --output-format stream-json`: an `assistant` message's `tool_use` block (its
  `input.command`, or the whole input for other tools) and the `tool_result` with the same id in
  a later `user` message; claude gives no exit code, only `is_error`.
- Chat Completions messages (mini-swe-agent's trajectory): `{"type": "message", "role":
  "assistant", "tool_calls": [{"id": ..., "function": {"name": ..., "arguments": "{...}"}}]}`
  and the `{"role": "tool", "tool_call_id": ...}` message answering it, its exit code in
  `extra.returncode` (or the `returncode` of its JSON content).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

OUTPUT_CHARS = 400  # of each command's output kept for display


@dataclass
class Command:
    """One command (or tool call): what ran, its exit code (None: not reported), whether it
    failed (None: unknown), and the start of its output."""

    command: str
    exit_code: int | None = None
    failed: bool | None = None
    output: str = ""


def _text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict))
    return "" if content is None else str(content)


def commands(transcript: bytes) -> list[Command]:
    """The commands of `transcript`, in order (the shapes in the module docstring). Lines that are
    not JSON objects are skipped; an empty list when none of the shapes occurs."""
    found: list[Command] = []
    claude_calls: dict[str, Command] = {}
    chat_calls: dict[str, Command] = {}
    for line in transcript.decode("utf-8", errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        kind = event.get("type")
        if kind == "command" and isinstance(event.get("command"), str):
            code = event.get("exit_code")
            found.append(Command(event["command"], code, None if code is None else code != 0,
                                 _text(event.get("output"))[:OUTPUT_CHARS]))
        elif kind == "item.completed" and isinstance(event.get("item"), dict) \
                and event["item"].get("type") == "command_execution":
            item = event["item"]
            code = item.get("exit_code")
            found.append(Command(str(item.get("command")), code, None if code is None else code != 0,
                                 _text(item.get("aggregated_output"))[:OUTPUT_CHARS]))
        elif kind == "message" and event.get("role") == "assistant" and isinstance(event.get("tool_calls"), list):
            for call in event["tool_calls"]:
                function = call.get("function") if isinstance(call, dict) else None
                if isinstance(function, dict):
                    chat_calls[str(call.get("id"))] = _chat_call(function)
                    found.append(chat_calls[str(call.get("id"))])
        elif kind == "message" and event.get("role") == "tool" and str(event.get("tool_call_id")) in chat_calls:
            _chat_result(chat_calls[str(event.get("tool_call_id"))], event)
        elif kind in ("assistant", "user") and isinstance(event.get("message"), dict):
            for block in event["message"].get("content") or []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "tool_use":
                    given = block.get("input") or {}
                    text = str(given["command"]) if isinstance(given.get("command"), str) else json.dumps(given)
                    call = Command(f"{block.get('name')}: {text}" if block.get("name") != "Bash" else text)
                    claude_calls[str(block.get("id"))] = call
                    found.append(call)
                elif block.get("type") == "tool_result" and str(block.get("tool_use_id")) in claude_calls:
                    call = claude_calls[str(block.get("tool_use_id"))]
                    call.failed = bool(block.get("is_error"))
                    call.output = _text(block.get("content"))[:OUTPUT_CHARS]
    return found


def _chat_call(function: dict) -> Command:
    """A Chat Completions tool call: its `command` argument, or the tool's name and arguments."""
    try:
        given = json.loads(function.get("arguments") or "{}")
    except ValueError:
        given = function.get("arguments")
    if isinstance(given, dict) and isinstance(given.get("command"), str):
        return Command(given["command"])
    return Command(f"{function.get('name')}: {given if isinstance(given, str) else json.dumps(given)}")


def _chat_result(call: Command, event: dict) -> None:
    """Fill `call` from the tool message answering it (mini-swe-agent keeps the exit code in
    `extra.returncode`, and also in the JSON of its content)."""
    extra = event.get("extra") if isinstance(event.get("extra"), dict) else {}
    code, output = extra.get("returncode"), extra.get("raw_output")
    if code is None or output is None:
        try:
            content = json.loads(_text(event.get("content")))
        except ValueError:
            content = {}
        if isinstance(content, dict):
            code = code if code is not None else content.get("returncode")
            output = output if output is not None else content.get("output")
    call.exit_code = code if isinstance(code, int) else None
    call.failed = None if call.exit_code is None else call.exit_code != 0
    call.output = _text(output if output is not None else event.get("content"))[:OUTPUT_CHARS]
