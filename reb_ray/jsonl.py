"""JSON Lines as reb-ray reads them: one object per line, a torn or foreign line skipped.

Every JSON Lines file reb-ray reads is appended to by a process that may be killed mid-line (an
agent's event stream, the verifications dataset), so a line that is not JSON, or is JSON but not
an object, is skipped rather than failing the whole read: the lines around it stay readable.
"""

from __future__ import annotations

import json


def json_objects(data: bytes | str | None) -> list[dict]:
    """The JSON objects of `data`'s lines, in order (bytes decoded as UTF-8, bad bytes replaced)."""
    if not data:
        return []
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    out = []
    for line in text.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out
