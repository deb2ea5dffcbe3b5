"""Token usage read from LLM responses' own usage fields, in one convention for all vendors.

The convention (OpenAI's; Anthropic's numbers are converted to it):

- `input_tokens`: every prompt token, cache reads and cache writes included;
- `cached_input_tokens`: of those, read from the prompt cache;
- `cache_write_tokens`: of those, written to the prompt cache;
- `output_tokens`: every generated token, reasoning included;
- `reasoning_tokens`: of those, reasoning.

A field is None when the response did not report it (Anthropic reports no reasoning count,
OpenAI no cache writes): unknown, never 0. Where each API keeps these numbers:

- Anthropic Messages: `usage` {input_tokens (uncached only), cache_read_input_tokens,
  cache_creation_input_tokens, output_tokens}; streaming: `message_start.message.usage`, then
  `message_delta.usage`, whose counts are cumulative (the last value of a field wins).
- OpenAI Responses: `usage` {input_tokens, input_tokens_details.cached_tokens, output_tokens,
  output_tokens_details.reasoning_tokens}; streaming: the `response` of `response.completed`
  (or `.incomplete` / `.failed`).
- OpenAI Chat Completions: `usage` {prompt_tokens, prompt_tokens_details.cached_tokens,
  completion_tokens, completion_tokens_details.reasoning_tokens}; streaming: a last chunk with
  `usage`, sent only when the request asks `stream_options.include_usage`.
"""

from __future__ import annotations

import dataclasses
import json
import zlib
from dataclasses import dataclass

from reb_ray.llm.apis import ANTHROPIC, CHAT, RESPONSES
from reb_ray.llm.sse import SSEReader

FIELDS = ("input_tokens", "cached_input_tokens", "cache_write_tokens", "output_tokens", "reasoning_tokens")
# What each API can express; the others are always None for it.
REPORTED_FIELDS = {
    ANTHROPIC: ("input_tokens", "cached_input_tokens", "cache_write_tokens", "output_tokens"),
    RESPONSES: ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens"),
    CHAT: ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens"),
}


def _plus(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else a + b


@dataclass(frozen=True)
class Usage:
    """Token counts of one or more responses (see the module docstring); None = not reported."""

    input_tokens: int | None = None
    cached_input_tokens: int | None = None
    cache_write_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None

    def __add__(self, other: Usage) -> Usage:
        """Field-wise sum; a field stays None only when neither side reported it."""
        return Usage(*(_plus(getattr(self, f), getattr(other, f)) for f in FIELDS))

    def as_dict(self) -> dict[str, int | None]:
        return dataclasses.asdict(self)

    def only(self, fields: tuple[str, ...]) -> Usage:
        """The same counts with every field outside `fields` set to None (what an API can report)."""
        return Usage(**{f: (getattr(self, f) if f in fields else None) for f in FIELDS})

    @property
    def empty(self) -> bool:
        return all(getattr(self, f) is None for f in FIELDS)


def _int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _detail(usage: dict, key: str, field: str) -> int | None:
    details = usage.get(key)
    return _int(details.get(field)) if isinstance(details, dict) else None


def from_anthropic(usage: dict) -> Usage:
    """Usage from an Anthropic `usage` object (input_tokens there excludes cache reads/writes)."""
    uncached = _int(usage.get("input_tokens"))
    read = _int(usage.get("cache_read_input_tokens"))
    written = _int(usage.get("cache_creation_input_tokens"))
    total = None if uncached is None else uncached + (read or 0) + (written or 0)
    return Usage(total, read, written, _int(usage.get("output_tokens")), None)


def from_responses(usage: dict) -> Usage:
    """Usage from an OpenAI Responses `usage` object."""
    return Usage(_int(usage.get("input_tokens")), _detail(usage, "input_tokens_details", "cached_tokens"), None,
                 _int(usage.get("output_tokens")), _detail(usage, "output_tokens_details", "reasoning_tokens"))


def from_chat(usage: dict) -> Usage:
    """Usage from an OpenAI Chat Completions `usage` object."""
    return Usage(_int(usage.get("prompt_tokens")), _detail(usage, "prompt_tokens_details", "cached_tokens"), None,
                 _int(usage.get("completion_tokens")),
                 _detail(usage, "completion_tokens_details", "reasoning_tokens"))


def from_body(api: str, body: dict) -> tuple[Usage | None, str | None]:
    """(usage, model) of a non-streaming response body; usage None when the body has none."""
    usage = body.get("usage")
    model = body.get("model") if isinstance(body.get("model"), str) else None
    if not isinstance(usage, dict):
        return None, model
    parse = {ANTHROPIC: from_anthropic, RESPONSES: from_responses, CHAT: from_chat}[api]
    return parse(usage), model


class ResponseUsageReader:
    """Reads usage and model from a response relayed in chunks, streaming (SSE) or not.

    Feed the raw response bytes as they arrive (`feed`), then `finish()` returns (usage, model);
    usage is None when the response carried none. `complete` says whether what was fed is a
    whole answer: an SSE stream that reached its API's final event (Anthropic `message_stop`,
    Responses `response.completed` / `.incomplete` / `.failed`, Chat `[DONE]` or a choice's
    `finish_reason`; an `error` event ends any of them), a JSON body that parses; a body whose
    encoding cannot be read counts as complete (nothing to judge by). JSON bodies are kept up to MAX_BODY_BYTES;
    SSE streams are read event by event and only events mentioning usage or the model are
    decoded. gzip/deflate bodies are decompressed on the side (the relayed bytes are untouched).
    """

    MAX_BODY_BYTES = 32 * 1024 * 1024

    def __init__(self, api: str, content_type: str, content_encoding: str = "") -> None:
        self.api = api
        self.streaming = "text/event-stream" in content_type.lower()
        encoding = content_encoding.lower().strip()
        self._inflate = zlib.decompressobj(47) if encoding in ("gzip", "deflate", "x-gzip") else None
        self.unreadable = encoding not in ("", "identity", "gzip", "deflate", "x-gzip")
        self._sse = SSEReader()
        self._body = bytearray()
        self._raw_usage: dict = {}  # Anthropic: merged message_start + message_delta usage
        self._usage: Usage | None = None
        self.model: str | None = None
        self._ended = False  # the stream's final event was seen
        self._overflow = False  # a JSON body larger than MAX_BODY_BYTES: not kept whole

    def feed(self, chunk: bytes) -> None:
        if self.unreadable or not chunk:
            return
        if self._inflate is not None:
            chunk = self._inflate.decompress(chunk)
        if not self.streaming:
            if len(self._body) + len(chunk) <= self.MAX_BODY_BYTES:
                self._body += chunk
            else:
                self._overflow = True
            return
        for event, data in self._sse.feed(chunk):
            if "usage" in data or (self.model is None and "model" in data):
                self._on_event(event, data)
            if not self._ended:
                self._ended = _final(self.api, event, data)

    @property
    def complete(self) -> bool:
        """Whether the bytes fed so far are a whole answer (see the class docstring)."""
        if self.unreadable:
            return True
        if self.streaming:
            return self._ended
        if self._overflow:  # kept only in part: nothing to judge by
            return True
        try:
            json.loads(bytes(self._body))
        except ValueError:
            return False
        return True

    def _on_event(self, event: str | None, data: str) -> None:
        try:
            obj = json.loads(data)
        except ValueError:
            return
        if not isinstance(obj, dict):
            return
        kind = obj.get("type") or event
        if self.api == ANTHROPIC:
            if kind == "message_start" and isinstance(obj.get("message"), dict):
                message = obj["message"]
                self.model = message.get("model") or self.model
                self._merge_anthropic(message.get("usage"))
            elif kind == "message_delta":
                self._merge_anthropic(obj.get("usage"))
        elif self.api == RESPONSES:
            response = obj.get("response")
            if isinstance(response, dict):
                self.model = response.get("model") or self.model
                if isinstance(response.get("usage"), dict):
                    self._usage = from_responses(response["usage"])
        else:
            self.model = obj.get("model") or self.model
            if isinstance(obj.get("usage"), dict):
                self._usage = from_chat(obj["usage"])  # cumulative where a server repeats it

    def _merge_anthropic(self, usage) -> None:
        if isinstance(usage, dict):
            self._raw_usage.update({k: v for k, v in usage.items() if v is not None})
            self._usage = from_anthropic(self._raw_usage)

    def finish(self) -> tuple[Usage | None, str | None]:
        if not self.streaming and self._body and not self.unreadable:
            try:
                body = json.loads(bytes(self._body))
            except ValueError:
                return None, None
            if isinstance(body, dict):
                usage, model = from_body(self.api, body)
                return usage, model
            return None, None
        return self._usage, self.model


_FINAL_TYPES = {ANTHROPIC: ("message_stop",), RESPONSES: ("response.completed", "response.incomplete", "response.failed")}


def _final(api: str, event: str | None, data: str) -> bool:
    """Whether an SSE event ends its API's stream (ResponseUsageReader.complete)."""
    if event == "error":
        return True
    if api == CHAT:
        if data.strip() == "[DONE]":
            return True
        if '"finish_reason"' not in data:
            return False
    elif event is not None:
        return event in _FINAL_TYPES[api]
    elif not any(t in data for t in _FINAL_TYPES[api]) and '"error"' not in data:
        return False
    try:
        obj = json.loads(data)
    except ValueError:
        return False
    if not isinstance(obj, dict):
        return False
    if api == CHAT:
        choices = obj.get("choices")
        return isinstance(choices, list) and any(isinstance(c, dict) and c.get("finish_reason") for c in choices)
    return obj.get("type") in (*_FINAL_TYPES[api], "error")
