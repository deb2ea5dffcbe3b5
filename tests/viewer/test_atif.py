"""ATIF documents from each transcript shape reb-ray keeps, and the validator, which must fault
documents that break the specification's required fields and types."""

from __future__ import annotations

import copy
import json

import pytest

from reb_ray.llm.atif import TEXT_CHARS, trajectory, validate
from tests.viewer.runs import CHAT, CLAUDE, CLAUDE_REQUESTS, CODEX, COMMANDS, lines, request_log

ROW = {"sweep_id": "s", "trial_id": "a/t/0", "attempt": 1, "task_id": "t", "agent": "a", "agent_kind": "claude_code",
       "agent_version": "2.0.1", "llm_model": "claude-sonnet-4-5", "input_tokens": 4000, "output_tokens": 1000,
       "cached_input_tokens": 2000, "cost_usd": 0.02, "status": "scored", "prompt_sha256": "ab" * 32}


def test_claude_messages_become_agent_steps_with_their_requests():
    doc = trajectory(ROW, CLAUDE, request_log(CLAUDE_REQUESTS))
    assert validate(doc) == []
    agent = [s for s in doc["steps"] if s["source"] == "agent"]
    assert len(agent) == 3  # msg_1 (two events), msg_2, msg_3
    assert agent[0]["message"] == "Installing the requirements." and agent[0]["reasoning_content"] == "deps first"
    assert agent[0]["tool_calls"][0]["arguments"] == {"command": "pip install -r requirements.txt"}
    assert agent[1]["observation"]["results"][0] == {"content": "ModuleNotFoundError: No module named 'apex'",
                                                     "source_call_id": "tu_2", "extra": {"is_error": True}}
    assert [s["metrics"]["prompt_tokens"] for s in agent] == [1000, 1300, 1700]
    assert [s["metrics"]["cached_tokens"] for s in agent] == [500, 650, 850]
    assert doc["final_metrics"] == {"total_steps": 4, "total_prompt_tokens": 4000, "total_completion_tokens": 1000,
                                    "total_cached_tokens": 2000, "total_cost_usd": 0.02}
    assert doc["agent"] == {"name": "claude_code", "version": "2.0.1", "model_name": "claude-sonnet-4-5",
                            "extra": {"reb_ray_agent": "a"}}
    assert doc["extra"]["agent_session_id"] == "sess-1"


def test_codex_items_and_unattributed_metrics():
    doc = trajectory({**ROW, "agent_kind": "codex"}, CODEX, request_log([(1, 1, 0.1)] * 2, refused=0))
    assert validate(doc) == []
    steps = doc["steps"][1:]
    assert steps[0]["reasoning_content"] == "check the README"
    assert steps[0]["tool_calls"][0]["function_name"] == "bash"
    assert steps[0]["observation"]["results"][0]["extra"] == {"exit_code": 0}
    assert steps[1]["tool_calls"][0]["function_name"] == "file_change"
    assert steps[2]["message"] == "Environment ready."
    assert not any("metrics" in s for s in doc["steps"])
    assert doc["extra"]["metrics_attribution"].startswith("not per step: 2 answered model requests against 0")


def test_chat_messages_and_command_records():
    chat = trajectory(ROW, CHAT, request_log([(10, 1, 0.1), (20, 2, 0.2)], refused=0))
    assert validate(chat) == []
    assert [s["source"] for s in chat["steps"]] == ["user", "system", "user", "agent", "agent"]
    assert chat["steps"][3]["observation"]["results"][0]["source_call_id"] == "call_1"
    assert [s["metrics"]["prompt_tokens"] for s in chat["steps"][3:]] == [10, 20]
    own = trajectory({**ROW, "agent_kind": "command"}, COMMANDS, None)
    assert validate(own) == []
    assert [s["tool_calls"][0]["arguments"]["command"] for s in own["steps"][1:]] == \
        ["python -m venv /opt/venv", "/opt/venv/bin/pip install -e ."]
    assert own["steps"][2]["observation"]["results"][0]["extra"] == {"exit_code": 1}


def test_no_transcript_and_unknown_totals():
    doc = trajectory({**ROW, "cost_usd": None, "input_tokens": None, "agent_output_tail": "done"}, None, None)
    assert validate(doc) == []
    assert doc["steps"][1]["message"] == "done"
    assert "total_cost_usd" not in doc["final_metrics"] and "total_prompt_tokens" not in doc["final_metrics"]


def test_long_output_is_cut_and_marked():
    doc = trajectory(ROW, lines({"type": "command", "command": "yes", "exit_code": 0, "output": "y\n" * TEXT_CHARS}), None)
    step = doc["steps"][1]
    assert len(step["observation"]["results"][0]["content"]) == TEXT_CHARS
    assert step["extra"]["cut_chars"] == {"observation cmd-1": TEXT_CHARS}


@pytest.mark.parametrize("breaks, fault", [
    (lambda d: d.pop("schema_version"), "schema_version"),
    (lambda d: d["agent"].pop("version"), "agent.version"),
    (lambda d: d.update(steps=[]), "steps:"),
    (lambda d: d["steps"][1].update(step_id=5), "steps[1].step_id"),
    (lambda d: d["steps"][1].update(source="tool"), "steps[1].source"),
    (lambda d: d["steps"][1].pop("message"), "steps[1].message"),
    (lambda d: d["steps"][0].update(metrics={"prompt_tokens": 1}), "steps[0].metrics: only agent"),
    (lambda d: d["steps"][2]["tool_calls"][0].pop("function_name"), "function_name"),
    (lambda d: d["steps"][2]["tool_calls"][0].update(arguments="ls"), "arguments"),
    (lambda d: d["steps"][2]["observation"]["results"][0].update(source_call_id="nope"), "source_call_id"),
    (lambda d: d["steps"][1]["metrics"].update(prompt_tokens=-1), "prompt_tokens"),
    (lambda d: d["final_metrics"].update(total_cost_usd="0.02"), "total_cost_usd"),
])
def test_validator_faults_broken_documents(breaks, fault):
    doc = trajectory(ROW, CLAUDE, request_log(CLAUDE_REQUESTS))
    broken = copy.deepcopy(doc)
    breaks(broken)
    errors = validate(json.loads(json.dumps(broken)))
    assert any(fault in e for e in errors), errors


def test_codex_steps_get_their_requests_by_arrival_time():
    events = [json.loads(x) for x in CODEX.splitlines()]
    started = {"type": "item.started", "item": {"id": "item_1", "type": "command_execution", "command": "bash -lc 'pip install numpy'"}}
    events.insert(3, started)
    # When each event arrived (epoch seconds): the command started at 11.7 and completed at 15.7.
    # The four requests end at 11.5, 15.5, 17.5 and 18.0.
    arrived = [1.0, 1.1, 11.6, 11.7, 15.7, 15.8, 19.0, 19.1]
    transcript = lines(*events, {"type": "reb_ray.received_at", "times": arrived})
    log = [{"type": "request", "started_at": start, "duration_s": 1.5, "api": "openai_responses", "model": "gpt-5.1-codex",
            "status": 200, "cost_usd": cost, "usage": {"input_tokens": inp, "output_tokens": 10, "cached_input_tokens": 0}}
           for start, inp, cost in ((10.0, 100, 0.1), (14.0, 200, 0.2), (16.0, 300, 0.3), (16.5, 400, 0.4))]
    doc = trajectory({**ROW, "agent_kind": "codex", "input_tokens": 1000, "output_tokens": 40, "cost_usd": 1.0},
                     transcript, lines(*log))
    assert validate(doc) == []
    command, change, message = doc["steps"][1:]
    # Each step: the latest request that ended before its event arrived (the command's: before it
    # started); the request ending at 17.5 made no step and joins the step running then.
    assert [s["metrics"]["prompt_tokens"] for s in (command, change, message)] == [100, 500, 400]
    assert change["metrics"]["extra"]["model_requests"] == 2  # its own and the one that made no step
    assert command["reasoning_content"] == "check the README" and message["model_name"] == "gpt-5.1-codex"
    assert doc["extra"]["metrics_attribution"] == ("by time: 3 of 4 answered model requests on the first step whose "
                                                   "event arrived after the request ended; 1 made no step and are "
                                                   "added to the step running when they ended")
    steps = [s["metrics"] for s in doc["steps"] if "metrics" in s]
    assert sum(m["prompt_tokens"] for m in steps) == doc["final_metrics"]["total_prompt_tokens"]
    assert sum(m["cost_usd"] for m in steps) == pytest.approx(doc["final_metrics"]["total_cost_usd"])
    # Without the times line: no step gets metrics (the earlier test), never a guess.
    assert not any("metrics" in s for s in trajectory({**ROW, "agent_kind": "codex"}, CODEX, lines(*log))["steps"])


def test_polls_while_a_command_runs_join_its_step():
    """One answer made a message and a command (the message's step holds it); three polls of the
    running command answer while it runs: the command's step holds those three."""
    events = [{"type": "item.completed", "item": {"id": "i1", "type": "agent_message", "text": "Creating the venv."}},
              {"type": "item.started", "item": {"id": "i2", "type": "command_execution", "command": "pip install x"}},
              {"type": "item.completed", "item": {"id": "i2", "type": "command_execution", "command": "pip install x",
                                                  "aggregated_output": "ok", "exit_code": 0}}]
    transcript = lines(*events, {"type": "reb_ray.received_at", "times": [2.0, 2.1, 60.0]})
    log = [{"type": "request", "started_at": start, "duration_s": 0.5, "api": "openai_responses", "status": 200,
            "cost_usd": cost, "usage": {"input_tokens": inp, "output_tokens": 1}}
           for start, inp, cost in ((1.0, 2300, 0.5), (20.0, 10, 0.01), (30.0, 10, 0.01), (40.0, 10, 0.01))]
    doc = trajectory({**ROW, "agent_kind": "codex"}, transcript, lines(*log))
    message, command = doc["steps"][1:]
    assert message["metrics"]["prompt_tokens"] == 2300 and "model_requests" not in message["metrics"].get("extra", {})
    assert command["metrics"]["prompt_tokens"] == 30 and command["metrics"]["extra"]["model_requests"] == 3
    assert command["metrics"]["cost_usd"] == pytest.approx(0.03)
