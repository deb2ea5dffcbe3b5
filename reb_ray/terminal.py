"""Text an agent controlled, made safe to print on a terminal.

Agent output, failure reasons and report fields are the untrusted agent's words. Printed raw,
an escape sequence in them can clear the screen, rewrite earlier lines (hiding a failure),
retitle the window or, on some terminals, answer back as typed input. So every such text is
passed through `printable` before it reaches a terminal or an HTML page.
"""

from __future__ import annotations

import re

# C0 controls but tab and newline, DEL, C1 controls, and the Unicode bidirectional overrides
# and isolates (text that displays in another order than it reads: "Trojan Source").
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """`text` with every terminal control character shown as a visible escape (`\\x1b`,
    `\\u202e`); tabs and newlines are kept. Pure; never raises."""
    return _UNSAFE.sub(lambda m: ascii(m.group())[1:-1], text)
