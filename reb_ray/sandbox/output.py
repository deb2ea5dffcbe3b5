"""Bounded, incrementally decoded capture of a command's output.

Agents and research code can print gigabytes; the harness keeps the first `head_bytes` and the
last `tail_bytes` and counts what it dropped, so memory stays bounded whatever the command does.
Bytes are decoded as UTF-8 with replacement, so invalid bytes and multibyte characters split
across chunk boundaries never raise. `OutputCapture` also streams every byte to the success
rule's pattern watch (watch.py) and to an optional sink (the full-log artifact), so what is
judged and what is kept never depend on the bounded head and tail.
"""

from __future__ import annotations

import codecs
import re
import threading
import time
from typing import Protocol, Sequence

DEFAULT_HEAD_BYTES = 64 * 1024
DEFAULT_TAIL_BYTES = 64 * 1024
TRUNCATION_MARK = "\n[... {dropped} bytes dropped by reb-ray ...]\n"
TRUNCATION_MARK_RE = re.compile(r"\n\[\.\.\. \d+ bytes dropped by reb-ray \.\.\.\]\n")


class BoundedOutput:
    """Accumulates a byte stream keeping a head and a tail of bounded size.

    Thread-safe: one reader thread may `feed` while another reads the properties.
    Memory use is at most `head_bytes + 2 * tail_bytes` bytes whatever is fed.
    """

    def __init__(self, head_bytes: int = DEFAULT_HEAD_BYTES, tail_bytes: int = DEFAULT_TAIL_BYTES) -> None:
        if head_bytes < 0 or tail_bytes < 0:
            raise ValueError("head_bytes and tail_bytes must be >= 0")
        self._head_limit = head_bytes
        self._tail_limit = tail_bytes
        self._head_text: list[str] = []
        self._head_decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._head_len = 0
        self._tail = bytearray()
        self._total = 0
        self._lock = threading.Lock()

    def feed(self, chunk: bytes) -> None:
        """Add `chunk` (bytes) to the capture."""
        if not chunk:
            return
        with self._lock:
            self._total += len(chunk)
            room = self._head_limit - self._head_len
            if room > 0:
                taken = chunk[:room]
                self._head_len += len(taken)
                self._head_text.append(self._head_decoder.decode(taken))
                chunk = chunk[room:]
            if chunk and self._tail_limit:
                self._tail += chunk
                # Trim lazily (at 2x) so a stream of small chunks is not quadratic.
                if len(self._tail) > 2 * self._tail_limit:
                    del self._tail[: len(self._tail) - self._tail_limit]

    @property
    def total_bytes(self) -> int:
        """Bytes fed so far."""
        return self._total

    @property
    def dropped_bytes(self) -> int:
        """Bytes fed but kept in neither head nor tail."""
        with self._lock:
            kept_tail = min(len(self._tail), self._tail_limit)
            return max(0, self._total - self._head_len - kept_tail)

    @property
    def truncated(self) -> bool:
        """True when some bytes were dropped."""
        return self.dropped_bytes > 0

    def text(self) -> str:
        """The kept output as text: head, a truncation mark if bytes were dropped, then tail."""
        with self._lock:
            head = "".join(self._head_text) + self._head_decoder.decode(b"", final=True)
            self._head_text = [head]
            self._head_decoder.reset()
            tail_bytes = bytes(self._tail[-self._tail_limit :]) if self._tail_limit else b""
            dropped = max(0, self._total - self._head_len - len(tail_bytes))
        # A tail cut may start inside a multibyte character: skip UTF-8 continuation bytes.
        start = 0
        while dropped and start < min(3, len(tail_bytes)) and (tail_bytes[start] & 0xC0) == 0x80:
            start += 1
        tail = tail_bytes[start:].decode("utf-8", errors="replace")
        if dropped:
            return head + TRUNCATION_MARK.format(dropped=dropped) + tail
        return head + tail


class OutputSink(Protocol):
    """Where a copy of every output byte goes as it arrives (e.g. a compressed log artifact)."""

    def write(self, data: bytes) -> None:
        """Take `data` (the next bytes of the output). Should not raise; if it does, the sink
        gets nothing more from this exec and the command is not disturbed."""


class OutputCapture:
    """One exec's output fan-out: the bounded head+tail, the pattern watch and the sink.

    Thread-safe: the provider's reader thread feeds, the exec's caller calls `finish`; bytes
    that arrive after `finish` (a background child still holding the pipe) are ignored, so a
    sink may be closed as soon as the exec returned. Memory is bounded by BoundedOutput and
    PatternWatch, whatever the command prints.
    """

    def __init__(self, head_bytes: int = DEFAULT_HEAD_BYTES, tail_bytes: int = DEFAULT_TAIL_BYTES,
                 watch: Sequence[str] = (), sink: OutputSink | None = None) -> None:
        from reb_ray.sandbox.watch import PatternWatch

        self.bounded = BoundedOutput(head_bytes, tail_bytes)
        self._watch = PatternWatch(watch)
        self._sink = sink
        self._lock = threading.Lock()
        self._finished = False

    def feed(self, chunk: bytes) -> None:
        """Add `chunk` (bytes) to every consumer."""
        with self._lock:
            if self._finished or not chunk:
                return
            self.bounded.feed(chunk)
            self._watch.feed(chunk)
            if self._sink is not None:
                try:
                    self._sink.write(chunk)
                except Exception:  # noqa: BLE001 - a full disk must not break the command
                    self._sink = None

    def wait_for_reader(self, reader: threading.Thread, quiet_s: float = 0.2, max_s: float = 5.0) -> None:
        """After the command exited, let `reader` drain what is still in flight: wait while
        bytes keep arriving (at most `max_s` seconds), but only `quiet_s` once nothing arrives,
        since a background child may hold the stream open for ever."""
        deadline = time.monotonic() + max_s
        seen = -1
        while reader.is_alive() and self.bounded.total_bytes != seen and time.monotonic() < deadline:
            seen = self.bounded.total_bytes
            reader.join(quiet_s)

    def finish(self) -> dict:
        """Stop consuming and return the ExecResult fields of the output: output, truncated,
        dropped_bytes, total_bytes (bytes) and pattern_matches ({pattern: matched})."""
        with self._lock:
            self._finished = True
            return {"output": self.bounded.text(), "truncated": self.bounded.truncated,
                    "dropped_bytes": self.bounded.dropped_bytes, "total_bytes": self.bounded.total_bytes,
                    "pattern_matches": self._watch.finish()}
