"""A CLI's JSON Lines output, read as it streams: every event handed to a fold, a bounded copy kept.

codex (`exec --json`) and claude (`-p --output-format stream-json`) print one JSON event per
line on stdout. `JsonLines` is the exec's output sink (reb_ray.sandbox.output): each
complete line that is a JSON object goes to `on_event` as it arrives, so what the runner
concludes (usage, the last message, the result) never depends on which lines were kept. The
kept copy, `transcript()`, is the trial's trajectory artifact: the first and the last
TRANSCRIPT_BYTES / 2 of the lines, whole lines only, with one marker line
`{"type": "reb_ray.dropped", "lines": N, "bytes": B}` where lines were cut. A line longer than
LINE_BYTES is neither parsed nor kept (counted in `overlong_lines`): memory stays bounded
whatever the CLI prints.

Each kept line's arrival time (epoch seconds, this host's clock, as the LLM proxy stamps its
requests) is kept too; `transcript(with_times=True)` ends with one more line,
`{"type": "reb_ray.received_at", "times": [t, ...]}`, one time per line before it (null for
the marker). The ATIF trajectory pairs the proxy's requests with the events they produced by
these times when a CLI's events mark no turns (codex).
"""

from __future__ import annotations

import collections
import json
import threading
import time
from typing import Callable

TRANSCRIPT_BYTES = 16 * 1024 * 1024
LINE_BYTES = 4 * 1024 * 1024


class JsonLines:
    """OutputSink parsing JSON Lines; see the module docstring. Thread-safe (the exec's reader
    thread writes, the runner reads after the exec returned). Call `close()` after the exec to
    take a last line that had no newline."""

    def __init__(self, on_event: Callable[[dict], None], transcript_bytes: int = TRANSCRIPT_BYTES,
                 line_bytes: int = LINE_BYTES) -> None:
        self._on_event = on_event
        self._half = transcript_bytes // 2
        self._line_bytes = line_bytes
        self._partial = bytearray()
        self._skipping = False  # inside an overlong line: drop until its newline
        self._head: list[bytes] = []
        self._head_times: list[float] = []
        self._head_size = 0
        self._tail: collections.deque[bytes] = collections.deque()
        self._tail_times: collections.deque[float] = collections.deque()
        self._tail_size = 0
        self._dropped_lines = self._dropped_bytes = 0
        self.events = self.non_json_lines = self.overlong_lines = 0
        self._lock = threading.Lock()

    def write(self, data: bytes) -> None:
        with self._lock:
            start = 0
            while True:
                end = data.find(b"\n", start)
                if end == -1:
                    self._buffer(data[start:])
                    return
                self._buffer(data[start:end])
                if self._skipping:
                    self._skipping = False
                else:
                    self._line(bytes(self._partial))
                self._partial.clear()
                start = end + 1

    def close(self) -> None:
        """Take the last line if it had no newline (a CLI killed mid-line leaves half a line,
        which is then not JSON and only counted)."""
        with self._lock:
            if self._partial and not self._skipping:
                self._line(bytes(self._partial))
            self._partial.clear()
            self._skipping = False

    def _buffer(self, piece: bytes) -> None:
        if self._skipping or not piece:
            return
        if len(self._partial) + len(piece) > self._line_bytes:
            self._partial.clear()
            self._skipping = True
            self.overlong_lines += 1
            return
        self._partial += piece

    def _line(self, line: bytes) -> None:
        line = line.strip()
        if not line:
            return
        try:
            event = json.loads(line)
        except ValueError:
            event = None
        if not isinstance(event, dict):
            self.non_json_lines += 1
            return
        self.events += 1
        self._keep(line + b"\n")
        try:
            self._on_event(event)
        except Exception:  # noqa: BLE001 - an odd event must not lose the rest of the stream
            pass

    def _keep(self, line: bytes) -> None:
        now = round(time.time(), 3)
        if self._head_size + len(line) <= self._half and not self._tail:
            self._head.append(line)
            self._head_times.append(now)
            self._head_size += len(line)
            return
        self._tail.append(line)
        self._tail_times.append(now)
        self._tail_size += len(line)
        while self._tail_size > self._half and self._tail:
            gone = self._tail.popleft()
            self._tail_times.popleft()
            self._tail_size -= len(gone)
            self._dropped_lines += 1
            self._dropped_bytes += len(gone)

    def transcript(self, with_times: bool = False) -> bytes | None:
        """The kept lines as JSON Lines bytes (see the module docstring), with their arrival
        times as a last line when `with_times`; None when the CLI printed no JSON event at all."""
        with self._lock:
            if not self._head and not self._tail:
                return None
            marker: list[bytes] = []
            if self._dropped_lines:
                marker = [json.dumps({"type": "reb_ray.dropped", "lines": self._dropped_lines,
                                      "bytes": self._dropped_bytes}).encode() + b"\n"]
            times: list[bytes] = []
            if with_times:
                listed = [*self._head_times, *([None] if marker else []), *self._tail_times]
                times = [json.dumps({"type": "reb_ray.received_at", "times": listed}).encode() + b"\n"]
            return b"".join([*self._head, *marker, *self._tail, *times])
