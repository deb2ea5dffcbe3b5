"""Answers that end before they are whole, from an upstream written byte by byte on a real socket.

Every framing HTTP/1.1 has (a body delimited by the connection's close, a Content-Length, chunked)
is cut in the middle of an Anthropic event stream or a JSON body, ended cleanly or with a TCP
reset. The proxy must record each as `infra_llm_unavailable` and hand the client a cut answer
(never a complete-looking one); the same answers sent whole count as good.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import threading
from contextlib import contextmanager

import aiohttp
import pytest

from reb_ray.llm.apis import ANTHROPIC, CHAT
from reb_ray.llm.proxy import ProxyServer
from tests.llm.clients import PATHS, request_body
from reb_ray.testing.llm_session import REAL_KEY_ENV

START = (b'event: message_start\ndata: {"type":"message_start","message":{"model":"claude-sonnet-4-5",'
         b'"usage":{"input_tokens":10,"output_tokens":1}}}\n\n'
         b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
         b'"delta":{"type":"text_delta","text":"hel"}}\n\n')
END = (b'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":5}}\n\n'
       b'event: message_stop\ndata: {"type":"message_stop"}\n\n')
JSON = json.dumps({"id": "x", "object": "chat.completion", "model": "gpt-4o-mini",
                   "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
                   "usage": {"prompt_tokens": 10, "completion_tokens": 2}}).encode()
SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
JSON_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"


def _chunked(*parts: bytes, last: bool = True) -> bytes:
    body = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts)
    return body + (b"0\r\n\r\n" if last else b"")


# (name, api, bytes the upstream sends, whether it resets the connection, whether the answer is whole)
CASES = [
    ("close-delimited stream, reset", ANTHROPIC, SSE_HEAD + b"Connection: close\r\n\r\n" + START, True, False),
    ("close-delimited stream, closed", ANTHROPIC, SSE_HEAD + b"Connection: close\r\n\r\n" + START, False, False),
    ("content-length stream, short", ANTHROPIC, SSE_HEAD + b"Content-Length: %d\r\n\r\n" % (len(START) + len(END)) + START,
     False, False),
    ("chunked stream, no last chunk", ANTHROPIC, SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + _chunked(START, last=False),
     True, False),
    ("chunked stream, whole framing, no final event", ANTHROPIC,
     SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + _chunked(START), False, False),
    ("close-delimited JSON, reset", CHAT, JSON_HEAD + b"Connection: close\r\n\r\n" + JSON[:40], True, False),
    ("close-delimited stream, whole", ANTHROPIC, SSE_HEAD + b"Connection: close\r\n\r\n" + START + END, False, True),
    ("close-delimited stream, whole, then reset", ANTHROPIC, SSE_HEAD + b"Connection: close\r\n\r\n" + START + END,
     True, True),
    ("close-delimited JSON, whole", CHAT, JSON_HEAD + b"Connection: close\r\n\r\n" + JSON, False, True),
]


@contextmanager
def raw_upstream(answer: bytes, reset: bool):
    """A one-shot HTTP server on 127.0.0.1: reads one request, sends `answer` as given, then
    closes the connection, with a TCP reset when `reset` (SO_LINGER 0). Yields its URL."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, body = data.split(b"\r\n\r\n", 1)
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            while len(body) < length:
                body += conn.recv(65536)
            conn.sendall(answer)
            if reset:
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            else:
                conn.shutdown(socket.SHUT_WR)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        thread.join(10)
        server.close()


async def _client(url: str, api: str, key: str) -> tuple[int, str]:
    """(status, "whole" / "cut") of one request as a client sees it."""
    stream = api == ANTHROPIC
    async with aiohttp.ClientSession() as session:
        async with session.post(url + PATHS[api], json=request_body(api, stream), headers={"x-api-key": key}) as response:
            try:
                await response.read()
            except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError):
                return response.status, "cut"
            return response.status, "whole"


@pytest.mark.parametrize("name, api, answer, reset, whole", CASES, ids=[c[0] for c in CASES])
def test_an_answer_cut_short_is_unavailable_and_the_client_sees_it_cut(name, api, answer, reset, whole, real_key):
    with ProxyServer() as proxy, raw_upstream(answer, reset) as upstream:
        key = proxy.register_trial("t1", upstream, REAL_KEY_ENV)
        status, seen = asyncio.run(_client(proxy.url, api, key))
        [entry] = proxy.request_log("t1")
    if whole:
        assert (status, seen, entry["category"]) == (200, "whole", None), entry
        assert entry["usage"]["input_tokens"] == 10 and entry["usage"]["output_tokens"] in (2, 5)
    else:
        assert entry["category"] == "infra_llm_unavailable", entry
        # A stream reaches the client cut off; a JSON body read whole first is answered 502.
        assert (status, seen) == ((502, "whole") if api == CHAT else (200, "cut"))
