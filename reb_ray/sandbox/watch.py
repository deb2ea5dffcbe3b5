"""Searching a command's whole output for regexes while it streams (bounded memory).

A stage's success rule may need a log pattern (`SuccessRule.log_pattern`), and the release
searches the whole log; the harness keeps only a head and a tail of the output (output.py), so
the pattern is matched here, on every byte, as the chunks arrive: a pattern printed in the
middle of a long log, outside the kept head and tail, still counts.

Semantics: for each pattern, whether `re.search(pattern, whole_output, re.MULTILINE)` finds a
match in the output decoded as UTF-8 with replacement, with two documented limits that keep
memory bounded: a match may span at most WINDOW_CHARS characters, and `\\A` / `\\Z` behave as at
the start and end of a searched window. Matches split across chunk (or window) boundaries are
found: every search runs over the last WINDOW_CHARS characters already searched (cut at a line
start) plus the new text, and ends at a line end, where MULTILINE `$` matches exactly as in the
whole output. Only a line longer than WINDOW_CHARS is searched before its end; a match that
touches such a forced end is not trusted until more text (or the end of the output) arrives.
"""

from __future__ import annotations

import codecs
import re
from typing import Sequence

#: Characters of already-searched text kept as context, and the longest match found across
#: a boundary.
WINDOW_CHARS = 64 * 1024
#: Unsearched characters collected before a search runs (amortises the context re-scan).
BATCH_CHARS = 64 * 1024


class PatternWatch:
    """Incremental `re.search(p, output, re.MULTILINE)` for several patterns `p` at once.

    Feed bytes with `feed`, then call `finish` once for {pattern: matched}. Memory is at most
    about 5 * WINDOW_CHARS characters plus one chunk, whatever is fed. Raises re.error at
    construction for a pattern that does not compile. Not thread-safe: one reader feeds
    (OutputCapture serialises callers).
    """

    def __init__(self, patterns: Sequence[str]) -> None:
        self._compiled = {p: re.compile(p, re.MULTILINE) for p in dict.fromkeys(patterns)}
        self._matched = {p: False for p in self._compiled}
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buf = ""  # context (already searched) + new text
        self._new: list[str] = []  # decoded text not yet appended to _buf (joined once per batch)
        self._new_len = 0
        self._searched = 0  # index in _buf up to which text has been searched
        self._origin = 0  # first index of _buf that belongs to the search (0, or 1 after a mid-line cut)
        self._done = not self._compiled

    @property
    def pending(self) -> list[str]:
        """Patterns not matched yet."""
        return [p for p, hit in self._matched.items() if not hit]

    def feed(self, chunk: bytes) -> None:
        """Add `chunk` (bytes of the output) and search what can be searched safely."""
        if self._done or not chunk:
            return
        text = self._decoder.decode(chunk)
        self._new.append(text)
        self._new_len += len(text)
        if self._new_len < BATCH_CHARS:
            return  # small chunks (one line each) are only collected: no copy of the buffer per chunk
        self._buf += "".join(self._new)
        self._new, self._new_len = [], 0
        unsearched = len(self._buf) - self._searched
        line_end = self._buf.rfind("\n", self._searched)
        if line_end >= 0 and line_end - self._searched >= BATCH_CHARS // 2:
            self._search(line_end, forced=False)
        elif unsearched > 2 * WINDOW_CHARS:  # one very long line (progress bars with \r, binary)
            self._search(len(self._buf), forced=True)

    def finish(self) -> dict[str, bool]:
        """Search the rest with the output's real end and return {pattern: matched}."""
        if not self._done:
            self._buf += "".join(self._new) + self._decoder.decode(b"", final=True)
            self._new = []
            self._search(len(self._buf), forced=False)
            self._done = True
            self._buf = ""
        return dict(self._matched)

    def _search(self, end: int, forced: bool) -> None:
        """Search `_buf[_origin:end]` (as if the text ended at `end`), then keep only context."""
        for pattern in self.pending:
            for match in self._compiled[pattern].finditer(self._buf, self._origin, end):
                if not forced or match.end() < end:
                    self._matched[pattern] = True
                    break
        if not self.pending:
            self._done = True
            self._buf = ""
            return
        keep_from = max(0, end - WINDOW_CHARS)
        if keep_from == 0:
            self._searched = end
            return
        # Context starts at the line start before `keep_from` when one is near (so `^` can
        # match at it); else mid-line with one extra character, so `^` does not match at the cut.
        newline = self._buf.rfind("\n", max(0, keep_from - WINDOW_CHARS), keep_from)
        if newline >= 0:
            start, self._origin = newline + 1, 0
        else:
            start, self._origin = keep_from - 1, 1
        self._buf = self._buf[start:]
        self._searched = end - start
