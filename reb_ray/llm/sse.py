"""Server-sent events (the streaming format of all three LLM APIs): write one, read a stream.

Format per the WHATWG HTML spec, section "Server-sent events": events are separated by a blank
line; `event:` names an event, `data:` lines are joined with newlines; `:` lines are comments.
"""

from __future__ import annotations

import json
import re

_BOUNDARY = re.compile(rb"\r\n\r\n|\n\n|\r\r")
MAX_EVENT_BYTES = 16 * 1024 * 1024  # a larger "event" is not a stream we can read; dropped


def format_event(data: dict | str, event: str | None = None) -> bytes:
    """One SSE event as bytes: `event: NAME` (if given) and a single `data:` line, then a blank line.

    `data` is JSON-encoded unless it is already a string (e.g. the Chat API's `[DONE]`).
    """
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


class SSEReader:
    """Incremental reader: `feed(bytes)` returns the events completed so far as (event, data) pairs.

    `event` is None when the event has no `event:` line; `data` is the joined data text. Bytes may
    arrive split anywhere (mid-line, mid-UTF-8 character). An event larger than MAX_EVENT_BYTES
    is dropped and counted in `dropped` (the caller's usage for it is then unknown).
    """

    def __init__(self) -> None:
        self._buffer = b""
        self.dropped = 0

    def feed(self, chunk: bytes) -> list[tuple[str | None, str]]:
        self._buffer += chunk
        events = []
        while True:
            match = _BOUNDARY.search(self._buffer)
            if match is None:
                break
            raw, self._buffer = self._buffer[: match.start()], self._buffer[match.end():]
            parsed = _parse(raw)
            if parsed is not None:
                events.append(parsed)
        if len(self._buffer) > MAX_EVENT_BYTES:
            self._buffer = b""
            self.dropped += 1
        return events


def _parse(raw: bytes) -> tuple[str | None, str] | None:
    event, data = None, []
    for line in raw.decode("utf-8", errors="replace").splitlines():
        if not line or line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            event = value
        elif field == "data":
            data.append(value)
    if event is None and not data:
        return None
    return event, "\n".join(data)
