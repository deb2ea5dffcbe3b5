"""Plain HTTP clients for the llm tests: real aiohttp requests, one request body per API."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

import aiohttp
from multidict import CIMultiDict

from reb_ray.llm.apis import ANTHROPIC, CHAT, RESPONSES
from reb_ray.llm.sse import SSEReader

PATHS = {ANTHROPIC: "/v1/messages", RESPONSES: "/v1/responses", CHAT: "/v1/chat/completions"}
# The tools each CLI offers, as it offers them (claude's Bash, codex's exec_command,
# mini-swe-agent's bash), trimmed to the schema parts the endpoint reads.
TOOLS = {
    ANTHROPIC: [{"name": "Read", "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}},
                {"name": "Bash", "input_schema": {"type": "object", "properties": {"command": {"type": "string"},
                                                                                   "description": {"type": "string"}}}}],
    RESPONSES: [{"type": "function", "name": "exec_command",
                 "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}, "workdir": {"type": "string"},
                                                                 "yield_time_ms": {"type": "number"}}}},
                {"type": "function", "name": "write_stdin", "parameters": {"type": "object", "properties": {}}}],
    CHAT: [{"type": "function", "function": {"name": "bash", "parameters": {
        "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}],
}


def request_body(api: str, stream: bool, model: str = "scripted-model", tools: bool | list = True, **extra) -> dict:
    """A minimal request of `api`; `tools` True offers the CLI's usual tools, a list those."""
    body: dict = {"model": model, "stream": stream}
    if api == RESPONSES:
        body["input"] = [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}]
    else:
        body["messages"] = [{"role": "user", "content": "hi"}]
    if api == ANTHROPIC:
        body["max_tokens"] = 1000
    if api == CHAT and stream:
        body["stream_options"] = {"include_usage": True}
    if tools:
        body["tools"] = TOOLS[api] if tools is True else tools
    body.update(extra)
    return body


@dataclass
class Answer:
    status: int
    headers: CIMultiDict
    body: bytes

    def json(self) -> dict:
        return json.loads(self.body)

    def events(self) -> list[tuple[str | None, str]]:
        return SSEReader().feed(self.body)


def auth_headers(key: str | None, style: str = "x-api-key") -> dict:
    if key is None:
        return {}
    return {"x-api-key": key} if style == "x-api-key" else {"Authorization": f"Bearer {key}"}


async def _post(base: str, path: str, body: dict | bytes, headers: dict, timeout_s: float) -> Answer:
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    async with aiohttp.ClientSession(timeout=timeout, auto_decompress=False) as session:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        async with session.post(base + path, data=data,
                                headers={"Content-Type": "application/json", **headers}) as response:
            return Answer(response.status, CIMultiDict(response.headers), await response.read())


def post(base: str, api: str, body: dict, key: str | None, style: str = "x-api-key", timeout_s: float = 30) -> Answer:
    """One POST of `body` to `api`'s path on `base`; the whole answer, raw bytes."""
    return asyncio.run(_post(base, PATHS[api], body, auth_headers(key, style), timeout_s))


def post_many(base: str, requests: list[tuple[str, dict, str]], timeout_s: float = 60) -> list[Answer]:
    """Concurrent POSTs: each (api, body, key); answers in the same order."""
    async def all_of() -> list[Answer]:
        return list(await asyncio.gather(*(_post(base, PATHS[api], body, auth_headers(key), timeout_s)
                                           for api, body, key in requests)))
    return asyncio.run(all_of())
