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
