"""Usage from each API's own fields, streaming or not, whatever the chunking."""

from __future__ import annotations

import gzip
import json

import pytest

from reb_ray.llm.apis import ANTHROPIC, CHAT, RESPONSES
from reb_ray.llm.scripted import ScriptedEndpoint, script_from
from reb_ray.llm.sse import SSEReader, format_event
from reb_ray.llm.usage import ResponseUsageReader, Usage, from_anthropic, from_chat, from_responses
from tests.llm.clients import post, request_body
from tests.llm.conftest import THREE_TURNS


def test_usage_sums_keep_unknown_fields_unknown():
    assert Usage(1, None, None, 2, None) + Usage(3, 4, None, 5, None) == Usage(4, 4, None, 7, None)
    assert Usage().empty and not Usage(output_tokens=0).empty


def test_each_apis_fields_in_one_convention():
    assert from_anthropic({"input_tokens": 10, "cache_read_input_tokens": 70, "cache_creation_input_tokens": 20,
                           "output_tokens": 5}) == Usage(100, 70, 20, 5, None)
    assert from_responses({"input_tokens": 100, "input_tokens_details": {"cached_tokens": 70}, "output_tokens": 5,
                           "output_tokens_details": {"reasoning_tokens": 2}}) == Usage(100, 70, None, 5, 2)
    assert from_chat({"prompt_tokens": 100, "completion_tokens": 5}) == Usage(100, None, None, 5, None)
    assert from_chat({"prompt_tokens": -1, "completion_tokens": True}) == Usage()  # nonsense is unknown, not 0


def test_sse_reader_gives_the_same_events_whatever_the_chunking():
    stream = (b": comment\n\nevent: a\ndata: {\"x\": 1}\n\n" + "data: caf\u00e9\r\ndata: line2\r\n\r\n".encode()
              + format_event("[DONE]"))
    whole = SSEReader().feed(stream)
    assert whole == [("a", '{"x": 1}'), (None, "caf\u00e9\nline2"), (None, "[DONE]")]
    reader = SSEReader()
    bytewise = [event for i in range(len(stream)) for event in reader.feed(stream[i:i + 1])]
    assert bytewise == whole


@pytest.mark.parametrize("api", [ANTHROPIC, RESPONSES, CHAT])
def test_a_stream_fed_byte_by_byte_gives_the_usage(api):
    with ScriptedEndpoint(script_from(THREE_TURNS)) as endpoint:
        answer = post(endpoint.url, api, request_body(api, True), "k")
    reader = ResponseUsageReader(api, answer.headers["Content-Type"])
    for i in range(len(answer.body)):
        reader.feed(answer.body[i:i + 1])
    usage, model = reader.finish()
    assert model == "claude-sonnet-4-5"
    assert (usage.input_tokens, usage.cached_input_tokens, usage.output_tokens) == (1200, 700, 45)


def test_anthropic_delta_counts_are_cumulative_not_added():
    # Newer API versions repeat the input counts in message_delta: the last value wins.
    stream = (format_event({"type": "message_start", "message": {"model": "m", "usage": {
                  "input_tokens": 10, "cache_read_input_tokens": 90, "output_tokens": 1}}}, "message_start")
              + format_event({"type": "message_delta", "usage": {"input_tokens": 10, "cache_read_input_tokens": 90,
                                                                  "output_tokens": 30}}, "message_delta"))
    reader = ResponseUsageReader(ANTHROPIC, "text/event-stream")
    reader.feed(stream)
    assert reader.finish() == (Usage(100, 90, None, 30, None), "m")


def test_a_gzip_body_is_read_on_the_side():
    body = json.dumps({"model": "m", "usage": {"prompt_tokens": 7, "completion_tokens": 3}}).encode()
    packed = gzip.compress(body)
    reader = ResponseUsageReader(CHAT, "application/json", "gzip")
    reader.feed(packed[:10])
    reader.feed(packed[10:])
    assert reader.finish() == (Usage(7, None, None, 3, None), "m")
    brotli = ResponseUsageReader(CHAT, "application/json", "br")
    brotli.feed(b"\x00\x01")
    assert brotli.finish() == (None, None) and brotli.unreadable


@pytest.mark.parametrize("api, events, final", [
    (ANTHROPIC, [("message_start", '{"type":"message_start","message":{}}')], ("message_stop", '{"type":"message_stop"}')),
    (RESPONSES, [("response.created", '{"type":"response.created","response":{}}')],
     ("response.completed", '{"type":"response.completed","response":{}}')),
    (RESPONSES, [(None, '{"type":"response.output_text.delta","delta":"hi"}')],
     (None, '{"type":"response.incomplete","response":{}}')),
    (CHAT, [(None, '{"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}')], (None, "[DONE]")),
    (CHAT, [(None, '{"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}')],
     (None, '{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}')),
    (ANTHROPIC, [("message_start", '{"type":"message_start","message":{}}')],
     ("error", '{"type":"error","error":{"type":"overloaded_error"}}')),
])
def test_a_stream_is_complete_only_with_its_final_event(api, events, final):
    from reb_ray.llm.sse import format_event

    reader = ResponseUsageReader(api, "text/event-stream")
    for event, data in events:
        reader.feed(format_event(data, event))
    assert not reader.complete
    reader.feed(format_event(final[1], final[0]))
    assert reader.complete


def test_a_json_body_is_complete_when_it_parses():
    reader = ResponseUsageReader(CHAT, "application/json")
    reader.feed(b'{"choices": [], "usage"')
    assert not reader.complete
    reader.feed(b': {"prompt_tokens": 1, "completion_tokens": 1}}')
    assert reader.complete
