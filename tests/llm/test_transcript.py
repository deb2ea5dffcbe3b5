"""Commands and exit codes read back from the transcript shapes the CLIs write."""

from __future__ import annotations

import json

from reb_ray.llm.transcript import Command, commands


def _lines(*events) -> bytes:
    return ("\n".join(e if isinstance(e, str) else json.dumps(e) for e in events) + "\n").encode()


def test_reb_rays_own_shape():
    data = _lines({"type": "request", "turn": 0},
                  {"type": "command", "command": "pip install numpy", "exit_code": 0, "output": "Successfully installed"},
                  "not json at all", [1, 2],
                  {"type": "command", "command": "python train.py", "exit_code": 1, "output": "x" * 1000})
    found = commands(data)
    assert [(c.command, c.exit_code, c.failed) for c in found] == [("pip install numpy", 0, False),
                                                                   ("python train.py", 1, True)]
    assert found[0].output == "Successfully installed" and len(found[1].output) == 400


def test_codex_exec_json_events():
    data = _lines({"type": "thread.started", "thread_id": "t"},
                  {"type": "item.started", "item": {"id": "item_1", "type": "command_execution", "command": "ls",
                                                    "status": "in_progress"}},
                  {"type": "item.completed", "item": {"id": "item_1", "type": "command_execution",
                                                      "command": "bash -lc ls", "aggregated_output": "repo\n",
                                                      "exit_code": 0, "status": "completed"}},
                  {"type": "item.completed", "item": {"id": "item_2", "type": "agent_message", "text": "done"}},
                  {"type": "turn.completed", "usage": {"input_tokens": 10}})
    assert commands(data) == [Command("bash -lc ls", 0, False, "repo\n")]


def test_claude_stream_json_tool_use_and_results():
    data = _lines(
        {"type": "system", "subtype": "init"},
        {"type": "assistant", "message": {"content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "python -V"}},
            {"type": "tool_use", "id": "toolu_2", "name": "Read", "input": {"file_path": "/work/repo/setup.py"}}]}},
        {"type": "user", "message": {"content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Python 3.11.7", "is_error": False},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": [{"type": "text", "text": "no such file"}],
             "is_error": True}]}},
        {"type": "result", "subtype": "success"})
    assert commands(data) == [Command("python -V", None, False, "Python 3.11.7"),
                              Command('Read: {"file_path": "/work/repo/setup.py"}', None, True, "no such file")]


def test_nothing_recognisable_is_no_commands():
    assert commands(b"") == [] and commands(_lines({"type": "message", "text": "hi"})) == []


def test_mini_swe_agent_chat_messages_and_their_tool_results():
    """mini-swe-agent's trajectory, as its runner stores it (a real one's shape, trimmed)."""
    data = _lines({"type": "info", "trajectory_format": "mini-swe-agent-1.1"},
                  {"type": "message", "role": "system", "content": "You are ..."},
                  {"type": "message", "role": "assistant", "content": "Building the venv.", "tool_calls": [
                      {"id": "call_0", "type": "function",
                       "function": {"name": "bash", "arguments": json.dumps({"command": "pip install numpy"})}}]},
                  {"type": "message", "role": "tool", "tool_call_id": "call_0",
                   "content": json.dumps({"returncode": 0, "output": "ok\n"}),
                   "extra": {"raw_output": "ok\n", "returncode": 0}},
                  {"type": "message", "role": "assistant", "content": None, "tool_calls": [
                      {"id": "call_1", "type": "function",
                       "function": {"name": "bash", "arguments": json.dumps({"command": "python train.py"})}}]},
                  {"type": "message", "role": "tool", "tool_call_id": "call_1",
                   "content": json.dumps({"returncode": 2, "output": "no such file\n"})})
    assert commands(data) == [Command("pip install numpy", 0, False, "ok\n"),
                              Command("python train.py", 2, True, "no such file\n")]
