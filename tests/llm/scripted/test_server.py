"""The scripted endpoint over real HTTP: each API's shapes, tool fitting, sessions, errors, hangs."""

from __future__ import annotations

import json
import re
import time

import aiohttp
import pytest

from reb_ray.llm.apis import ANTHROPIC, APIS, CHAT, RESPONSES
from reb_ray.llm.scripted import ScriptedEndpoint, script_from
from reb_ray.llm.scripted.server import fingerprint
from tests.llm.clients import post, request_body
from tests.llm.conftest import THREE_TURNS

# mini-swe-agent 2.x text-based mode's action regex (src/minisweagent/models/litellm_textbased_model.py).
MSWEA_ACTION = r"```mswea_bash_command\s*\n(.*?)\n```"


def tool_call_of(api: str, body: dict) -> tuple[str, dict]:
    """(tool name, arguments) of a non-streamed answer."""
    if api == ANTHROPIC:
        block = next(b for b in body["content"] if b["type"] == "tool_use")
        return block["name"], block["input"]
    if api == RESPONSES:
        item = next(i for i in body["output"] if i["type"] == "function_call")
        return item["name"], json.loads(item["arguments"])
    call = body["choices"][0]["message"]["tool_calls"][0]["function"]
    return call["name"], json.loads(call["arguments"])


def streamed_tool_call(api: str, events: list[tuple[str | None, str]]) -> tuple[str, dict]:
    """(tool name, arguments) reassembled from a stream's deltas, as a client does."""
    name, parts = None, []
    for _event, data in events:
        if data == "[DONE]":
            continue
        obj = json.loads(data)
        if api == ANTHROPIC:
            if obj["type"] == "content_block_start" and obj["content_block"]["type"] == "tool_use":
                name = obj["content_block"]["name"]
            elif obj["type"] == "content_block_delta" and obj["delta"]["type"] == "input_json_delta":
                parts.append(obj["delta"]["partial_json"])
        elif api == RESPONSES:
            if obj["type"] == "response.output_item.added" and obj["item"]["type"] == "function_call":
                name = obj["item"]["name"]
            elif obj["type"] == "response.function_call_arguments.delta":
                parts.append(obj["delta"])
        else:
            for call in (obj["choices"][0]["delta"].get("tool_calls") or []) if obj["choices"] else []:
                name = call["function"].get("name") or name
                parts.append(call["function"].get("arguments", ""))
    return name, json.loads("".join(parts))


@pytest.mark.parametrize("api", APIS)
def test_streamed_and_json_answers_carry_the_same_tool_call(api, endpoint):
    expected = {ANTHROPIC: ("Bash", {"command": "echo hi > /tmp/x"}),
                RESPONSES: ("exec_command", {"cmd": "echo hi > /tmp/x", "yield_time_ms": 30_000}),
                CHAT: ("bash", {"command": "echo hi > /tmp/x"})}[api]
    whole = post(endpoint.url, api, request_body(api, False), "json-session")
    streamed = post(endpoint.url, api, request_body(api, True), "stream-session")
    assert whole.status == streamed.status == 200
    assert tool_call_of(api, whole.json()) == expected
    assert streamed.headers["Content-Type"] == "text/event-stream"
    assert streamed_tool_call(api, streamed.events()) == expected


def test_anthropic_stream_has_the_events_claude_reads(endpoint):
    events = post(endpoint.url, ANTHROPIC, request_body(ANTHROPIC, True), "k").events()
    names = [e for e, _ in events]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    assert names.count("content_block_start") == names.count("content_block_stop") == 2  # text, then tool_use
    start = json.loads(events[0][1])["message"]["usage"]
    delta = json.loads(events[-2][1])
    # Anthropic's input_tokens leaves out cache reads and writes: 1200 - 700 - 300.
    assert start == {"input_tokens": 200, "cache_read_input_tokens": 700, "cache_creation_input_tokens": 300,
                     "output_tokens": 1}
    assert delta["usage"] == {"output_tokens": 45} and delta["delta"]["stop_reason"] == "tool_use"


def test_responses_stream_ends_with_completed_usage(endpoint):
    events = post(endpoint.url, RESPONSES, request_body(RESPONSES, True), "k").events()
    kinds = [json.loads(d)["type"] for _, d in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert [json.loads(d)["sequence_number"] for _, d in events] == list(range(len(events)))
    usage = json.loads(events[-1][1])["response"]["usage"]
    assert usage == {"input_tokens": 1200, "input_tokens_details": {"cached_tokens": 700}, "output_tokens": 45,
                     "output_tokens_details": {"reasoning_tokens": 12}, "total_tokens": 1245}


def test_chat_stream_sends_usage_only_when_asked(endpoint):
    asked = post(endpoint.url, CHAT, request_body(CHAT, True), "a").events()
    body = request_body(CHAT, True)
    del body["stream_options"]
    not_asked = post(endpoint.url, CHAT, body, "b").events()
    assert asked[-1][1] == not_asked[-1][1] == "[DONE]"
    assert json.loads(asked[-2][1])["usage"]["prompt_tokens"] == 1200
    assert all("usage" not in json.loads(d) for _, d in not_asked[:-1])


def test_chat_without_tools_answers_a_fenced_command_mini_swe_agent_parses(endpoint):
    answer = post(endpoint.url, CHAT, request_body(CHAT, False, tools=False), "text-mode").json()
    message = answer["choices"][0]["message"]
    assert "tool_calls" not in message and answer["choices"][0]["finish_reason"] == "stop"
    assert re.findall(MSWEA_ACTION, message["content"], re.DOTALL) == ["echo hi > /tmp/x"]
    assert message["content"].startswith("Writing the file.")


@pytest.mark.parametrize(("properties", "expected"), [
    ({"cmd": {"type": "string"}, "workdir": {"type": "string"}}, {"cmd": "ls"}),
    ({"command": {"type": "array", "items": {"type": "string"}}}, {"command": ["bash", "-lc", "ls"]}),
    ({}, {"command": "ls"}),
])
def test_the_command_argument_is_found_by_name_in_the_offered_schema(properties, expected):
    script = script_from({"turns": [{"kind": "tool", "command": "ls"}]})
    tools = [{"type": "function", "name": "shell", "parameters": {"type": "object", "properties": properties}}]
    with ScriptedEndpoint(script) as endpoint:
        answer = post(endpoint.url, RESPONSES, request_body(RESPONSES, False, tools=tools), "k")
    assert tool_call_of(RESPONSES, answer.json()) == ("shell", expected)


def test_explicit_tool_and_arguments_and_a_missing_tool():
    script = script_from({"turns": [
        {"kind": "tool", "tool": "Write", "arguments": {"file_path": "/tmp/r.json", "content": "{}"}},
        {"kind": "tool", "command": "ls", "tool": "Shell"},
    ]})
    tools = [{"name": "Write", "input_schema": {"properties": {"file_path": {}, "content": {}}}},
             {"name": "Bash", "input_schema": {"properties": {"command": {}}}}]
    with ScriptedEndpoint(script) as endpoint:
        first = post(endpoint.url, ANTHROPIC, request_body(ANTHROPIC, False, tools=tools), "k")
        second = post(endpoint.url, ANTHROPIC, request_body(ANTHROPIC, False, tools=tools), "k")
        state = endpoint.session("k")
    assert tool_call_of(ANTHROPIC, first.json()) == ("Write", {"file_path": "/tmp/r.json", "content": "{}"})
    assert second.status == 400
    assert "no shell tool among the offered tools ['Bash', 'Write']" in second.json()["error"]["message"]
    assert state["requests"][1]["tools"] == ["Bash", "Write"] and "error" in state["requests"][1]


def test_sessions_per_key_are_independent_and_record_tool_results(endpoint):
    first_a = post(endpoint.url, ANTHROPIC, request_body(ANTHROPIC, False), "key-a")
    first_b = post(endpoint.url, ANTHROPIC, request_body(ANTHROPIC, False), "key-b", style="bearer")
    result = [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_000000", "content": "hi\n"}]}]
    second_a = post(endpoint.url, ANTHROPIC, request_body(ANTHROPIC, False, messages=result), "key-a")
    assert first_a.body == first_b.body  # both at turn 0, byte for byte
    assert tool_call_of(ANTHROPIC, second_a.json()) == ("Bash", {"command": "cat /tmp/x"})
    assert endpoint.session("key-a")["position"] == 2 and endpoint.session("key-b")["position"] == 1
    assert endpoint.session("key-a")["requests"][1]["tool_result"] == "hi\n"
    assert set(endpoint.state()["sessions"]) == {fingerprint("key-a"), fingerprint("key-b")}  # never the keys
    assert "key-a" not in json.dumps(endpoint.state())


def test_a_session_past_the_last_turn_is_told_so(endpoint):
    for _ in range(3):
        assert post(endpoint.url, CHAT, request_body(CHAT, False), "k").status == 200
    over = post(endpoint.url, CHAT, request_body(CHAT, False), "k")
    assert over.status == 400 and over.json()["error"]["message"] == "scripted endpoint: script exhausted after 3 turns"


def test_error_turns_use_each_apis_error_shape_and_retry_after():
    script = script_from({"turns": [{"kind": "error", "status": 429, "retry_after_s": 1.5}]})
    with ScriptedEndpoint(script) as endpoint:
        anthropic = post(endpoint.url, ANTHROPIC, request_body(ANTHROPIC, False), "a")
        openai = post(endpoint.url, RESPONSES, request_body(RESPONSES, False), "b")
    assert anthropic.status == openai.status == 429
    assert anthropic.headers["retry-after"] == "1.5"
    assert anthropic.json() == {"type": "error", "error": {"type": "rate_limit_error",
                                                           "message": "rate limit exceeded (scripted)"}}
    assert openai.json()["error"]["type"] == "rate_limit_exceeded"


def test_a_timed_hang_answers_nothing_then_drops_the_connection():
    script = script_from({"turns": [{"kind": "hang", "seconds": 0.5}]})
    with ScriptedEndpoint(script) as endpoint:
        start = time.monotonic()
        with pytest.raises(aiohttp.ClientError):
            post(endpoint.url, CHAT, request_body(CHAT, False), "k", timeout_s=10)
        assert 0.45 <= time.monotonic() - start < 5


def test_scripts_by_key_and_models_route():
    other = script_from({"model": "other-model", "turns": [{"kind": "message", "text": "other"}]})
    with ScriptedEndpoint(script_from(THREE_TURNS), scripts_by_key={"special": other}) as endpoint:
        special = post(endpoint.url, CHAT, request_body(CHAT, False), "special").json()
        ordinary = post(endpoint.url, CHAT, request_body(CHAT, False), "ordinary").json()

        async def models() -> dict:
            async with aiohttp.ClientSession() as session:
                async with session.get(endpoint.url + "/v1/models") as response:
                    return await response.json()

        import asyncio

        listed = asyncio.run(models())
    assert special["choices"][0]["message"]["content"] == "other" and special["model"] == "other-model"
    assert ordinary["choices"][0]["finish_reason"] == "tool_calls"
    assert listed["data"][0]["id"] == "claude-sonnet-4-5"


def test_a_command_codex_reports_still_running_is_waited_on_without_a_turn_of_the_script(endpoint):
    """codex's exec_command returns after its yield time (at most 30 s) with the command still
    running in a session; the scripted model waits on it with write_stdin (no usage, no turn
    consumed) before its next turn, as a model waiting for an install does."""
    first = post(endpoint.url, RESPONSES, request_body(RESPONSES, False), "k")
    name, arguments = tool_call_of(RESPONSES, first.json())
    assert name == "exec_command" and arguments["yield_time_ms"] == 30_000
    running = [{"type": "function_call_output", "call_id": "c0",
                "output": "Chunk ID: a\nWall time: 30.0 seconds\nProcess running with session ID 7\nOutput:\n"}]
    wait = post(endpoint.url, RESPONSES, request_body(RESPONSES, False, input=running), "k")
    assert tool_call_of(RESPONSES, wait.json()) == ("write_stdin", {"session_id": 7, "chars": "", "yield_time_ms": 30_000})
    assert wait.json()["usage"]["input_tokens"] == 0 and endpoint.session("k")["position"] == 1
    done = [{"type": "function_call_output", "call_id": "c1", "output": "Process exited with code 0\nOutput:\nok\n"}]
    second = post(endpoint.url, RESPONSES, request_body(RESPONSES, False, input=done), "k")
    assert tool_call_of(RESPONSES, second.json()) == ("exec_command", {"cmd": "cat /tmp/x", "yield_time_ms": 30_000})
    assert endpoint.session("k")["position"] == 2
