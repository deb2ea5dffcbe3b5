"""The scripted LLM endpoint: a real HTTP server replaying a Script, so the agent CLIs are
tested end to end without a vendor's model or key.

It speaks Anthropic Messages (`POST /v1/messages`), OpenAI Responses (`POST /v1/responses`)
and Chat Completions (`POST /v1/chat/completions`), streaming (SSE) when the request says
`"stream": true` and one JSON body otherwise, plus `GET /v1/models`. Each API key (x-api-key
or bearer token; no key = one anonymous session) is its own session with its own position in
the script, so many trials replay scripts at once, independently. A request past the last
turn gets HTTP 400 "script exhausted". Ids and timestamps are deterministic (turn number and
the script's `created`), so the same turn gives the same bytes in every session.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from dataclasses import dataclass, field

from aiohttp import web

from reb_ray.llm.apis import ANTHROPIC, CHAT, RESPONSES, error_body
from reb_ray.background import BackgroundServer
from reb_ray.llm.registry import key_of
from reb_ray.llm.scripted import wire_anthropic, wire_chat, wire_responses
from reb_ray.llm.scripted.reply import Reply, ScriptMismatch, ToolCall, poll_call, tool_call
from reb_ray.llm.scripted.script import (DEFAULT_ERROR_MESSAGES, AnyTurn, ErrorTurn, HangTurn, MessageTurn, Script,
                                         ScriptUsage, ToolTurn)

_WIRES = {ANTHROPIC: wire_anthropic, RESPONSES: wire_responses, CHAT: wire_chat}
_ROUTES = {"messages": ANTHROPIC, "responses": RESPONSES, "chat/completions": CHAT}
MAX_REQUEST_BYTES = 128 * 1024 * 1024


def fingerprint(key: str) -> str:
    """How a session is named in `state()`: a short hash, never the key itself."""
    return hashlib.sha256(key.encode()).hexdigest()[:12] if key else "anonymous"


@dataclass
class Session:
    """One key's replay: `position` = turns consumed; `requests` = what each request offered."""

    script: Script
    position: int = 0
    requests: list[dict] = field(default_factory=list)

    def snapshot(self) -> dict:
        return {"position": self.position, "turns": len(self.script.turns()), "requests": [dict(r) for r in self.requests]}


class ScriptedEndpoint:
    """The endpoint served from a background thread: `start()`, `url`, `stop()`.

    `script` is replayed for every key; `scripts_by_key` gives particular keys their own.
    `state()` / `session(key)` show what each session consumed and was sent (tool names
    offered, the last tool result), and `max_in_flight` the most requests answered at once.
    """

    def __init__(self, script: Script, host: str = "127.0.0.1", port: int = 0,
                 scripts_by_key: dict[str, Script] | None = None) -> None:
        self.script = script
        self._scripts_by_key = dict(scripts_by_key or {})
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()
        self.in_flight = self.max_in_flight = 0
        self._server = BackgroundServer(self.make_app, host, port, name="reb-ray-scripted-llm")

    @property
    def url(self) -> str:
        return self._server.url

    def start(self) -> ScriptedEndpoint:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> ScriptedEndpoint:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def set_script(self, key: str, script: Script) -> None:
        """Gives `key` its own script (from its next request on if the session exists)."""
        with self._lock:
            self._scripts_by_key[key] = script
            if key in self._sessions:
                self._sessions[key].script = script

    def session(self, key: str) -> dict | None:
        with self._lock:
            session = self._sessions.get(key)
            return None if session is None else session.snapshot()

    def state(self) -> dict:
        with self._lock:
            return {"sessions": {fingerprint(k): s.snapshot() for k, s in self._sessions.items()},
                    "in_flight": self.in_flight, "max_in_flight": self.max_in_flight}

    def make_app(self) -> web.Application:
        """The aiohttp application (also used by `reb-ray llm serve` in the foreground)."""
        app = web.Application(client_max_size=MAX_REQUEST_BYTES)
        for path, api in _ROUTES.items():
            for prefix in ("/v1/", "/"):
                app.router.add_post(prefix + path, self._handler(api))
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/models", self._models)
        app.router.add_get("/_scripted/state", self._state)
        return app

    async def _models(self, _request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": self.script.model, "object": "model",
                                                              "created": self.script.created, "owned_by": "reb-ray"}]})

    async def _state(self, _request: web.Request) -> web.Response:
        return web.json_response(self.state())

    def _handler(self, api: str):
        async def handle(request: web.Request) -> web.StreamResponse:
            with self._lock:
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                return await self._answer(api, request)
            finally:
                with self._lock:
                    self.in_flight -= 1
        return handle

    def _next(self, key: str, entry: dict) -> tuple[int, Script, AnyTurn | None]:
        with self._lock:
            session = self._sessions.get(key)
            if session is None:
                session = self._sessions[key] = Session(self._scripts_by_key.get(key, self.script))
            turns = session.script.turns()
            index = session.position
            turn = turns[index] if index < len(turns) else None
            if turn is not None:
                session.position += 1
            entry["turn"] = index if turn is not None else None
            session.requests.append(entry)
            return index, session.script, turn

    async def _answer(self, api: str, request: web.Request) -> web.StreamResponse:
        try:
            body = json.loads(await request.read())
        except ValueError:
            return _error(api, 400, "scripted endpoint: the request body is not JSON")
        if not isinstance(body, dict):
            return _error(api, 400, "scripted endpoint: the request body is not a JSON object")
        wire = _WIRES[api]
        offered = wire.offered_tools(body)
        stream = body.get("stream") is True
        entry = {"api": api, "path": request.path_qs, "stream": stream, "model": body.get("model"),
                 "tools": sorted(offered), "tool_result": _clip(wire.last_tool_result(body))}
        poll = poll_call(wire.last_tool_result(body), offered) if api == RESPONSES else None
        if poll is not None:  # the model waits on its running command: no turn of the script
            return await self._send(api, request, body, self._poll_reply(key_of(request.headers), entry, poll), stream)
        index, script, turn = self._next(key_of(request.headers), entry)
        if turn is None:
            return _error(api, 400, f"scripted endpoint: script exhausted after {index} turns")
        if turn.delay_s:
            await asyncio.sleep(turn.delay_s)
        if isinstance(turn, HangTurn):
            await asyncio.sleep(turn.seconds if turn.seconds is not None else 10 ** 9)
            if request.transport is not None:
                request.transport.abort()
            return web.Response(status=504)
        if isinstance(turn, ErrorTurn):
            headers = {} if turn.retry_after_s is None else {"retry-after": f"{turn.retry_after_s:g}"}
            message = turn.message or DEFAULT_ERROR_MESSAGES.get(turn.status, f"scripted error {turn.status}")
            return _error(api, turn.status, message, turn.error_type, headers)
        try:
            reply = _reply(api, turn, offered, body, script, index)
        except ScriptMismatch as exc:
            entry["error"] = str(exc)
            return _error(api, 400, f"scripted endpoint: turn {index}: {exc}")
        return await self._send(api, request, body, reply, stream)

    def _poll_reply(self, key: str, entry: dict, call: ToolCall) -> Reply:
        """A wait with no usage (the script's sums stay what the script says), recorded in the
        session's requests as a poll."""
        with self._lock:
            session = self._sessions.get(key)
            if session is None:
                session = self._sessions[key] = Session(self._scripts_by_key.get(key, self.script))
            session.requests.append(dict(entry, turn=None, poll=True))
            polls = sum(1 for r in session.requests if r.get("poll"))
            script = session.script
        return Reply(text="", tool=call, usage=ScriptUsage(), model=script.model, ident=f"poll{polls:06d}",
                     created=script.created, chunks=script.stream_chunks)

    async def _send(self, api: str, request: web.Request, body: dict, reply: Reply, stream: bool) -> web.StreamResponse:
        wire = _WIRES[api]
        if not stream:
            return web.json_response(wire.body(reply))
        options = body.get("stream_options")
        chunks = (wire_chat.events(reply, isinstance(options, dict) and bool(options.get("include_usage")))
                  if api == CHAT else wire.events(reply))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        for chunk in chunks:
            await response.write(chunk)
        await response.write_eof()
        return response


def _reply(api: str, turn: ToolTurn | MessageTurn, offered: dict, body: dict, script: Script, index: int) -> Reply:
    common = {"usage": turn.usage, "model": script.model, "ident": f"{index:06d}", "created": script.created,
              "chunks": script.stream_chunks}
    if isinstance(turn, MessageTurn):
        return Reply(text=turn.text, tool=None, **common)
    if api == CHAT and not offered and turn.command is not None:
        # mini-swe-agent's text-based mode: the command in a fenced block, no tool call.
        fenced = f"```{script.text_fence}\n{turn.command}\n```"
        return Reply(text=f"{turn.text}\n\n{fenced}" if turn.text else fenced, tool=None, **common)
    return Reply(text=turn.text, tool=tool_call(turn, offered, api), **common)


def _error(api: str, status: int, message: str, error_type: str | None = None,
           headers: dict | None = None) -> web.Response:
    return web.Response(status=status, body=error_body(api, status, message, error_type),
                        content_type="application/json", headers=headers)


def _clip(text: str | None, limit: int = 2000) -> str | None:
    return text if text is None or len(text) <= limit else text[:limit] + "..."
