"""A stage's side logs: files its command writes besides its output (a helper's
error may be only there, so the stage row keeps it as evidence).

A stage command may start a helper process whose output goes to a file (torchft's lighthouse
writes /tmp/reb-ray-lighthouse.log); when the helper fails, the stage's own output shows only
the consequence (120 s of waiting for a port). The task spec names such files
(`StageSpec.side_logs`); they are removed before the stage runs, so what is collected is this
stage's, and the last TAIL_BYTES of each are collected after it into the stage row's
`side_logs` column: one {path, size_bytes, truncated, text, error} item per declared file.
"""

from __future__ import annotations

import posixpath

from reb_ray.errors import RebRayError
from reb_ray.sandbox import Sandbox

TAIL_BYTES = 64 * 1024  # bytes kept per side log (its end: where a failure is reported)

_CLEAR = 'for f; do [ -f "$f" ] && rm -f -- "$f"; done; true'
_COLLECT = 'if [ -f "$1" ]; then wc -c < "$1"; tail -c "$2" -- "$1"; else echo MISSING; fi'


def _paths(paths: list[str], workdir: str) -> list[str]:
    return [p if p.startswith("/") else posixpath.normpath(posixpath.join(workdir, p)) for p in paths]


def clear_side_logs(sandbox: Sandbox, paths: list[str], workdir: str) -> None:
    """Remove the regular files among `paths` (absolute, or relative to sandbox dir `workdir`)."""
    if paths:
        sandbox.exec(["/bin/sh", "-c", _CLEAR, "clear", *_paths(paths, workdir)], timeout=60)


def collect_side_logs(sandbox: Sandbox, paths: list[str], workdir: str) -> list[dict]:
    """One item per path: {path (as declared), size_bytes (whole file; null if missing),
    truncated (only the last TAIL_BYTES are in `text`), text (that tail, UTF-8 with
    replacement), error (why nothing was read, else null)}. Never raises for a missing file."""
    items = []
    for declared, path in zip(paths, _paths(paths, workdir)):
        item: dict = {"path": declared, "size_bytes": None, "truncated": None, "text": None, "error": None}
        try:
            res = sandbox.exec(["/bin/sh", "-c", _COLLECT, "collect", path, str(TAIL_BYTES)], timeout=60)
        except RebRayError as exc:
            item["error"] = f"cannot read: {exc}"[:300]
            items.append(item)
            continue
        first, _, text = res.output.partition("\n")
        if first.strip().isdigit():
            size = int(first.strip())
            item.update(size_bytes=size, truncated=size > TAIL_BYTES, text=text)
        elif first.strip() == "MISSING":
            item["error"] = "not found after the stage"
        else:
            item["error"] = f"cannot read (exit {res.exit_code}): {res.output.strip()[:200]}"
        items.append(item)
    return items
