"""Host side of the C0 probe: run probes/c0_probe.py in the sandbox and read its JSON record back.

The probe runs under the image's `/usr/bin/python3` (falling back to the report interpreter
when the agent removed it) with the toolbox's own node and pyright, against the report's
interpreter. Grading is separate and pure (reb_ray.grading.c0.grade_c0).
"""

from __future__ import annotations

import json
import logging
import posixpath
import uuid

from reb_ray.sandbox import Sandbox

log = logging.getLogger(__name__)

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: Seconds kept back from the exec deadline for the interpreter query, the search-path run and
#: writing the record, so that a slow pyright ends as a recorded timeout, not a lost record.
RESERVE_S = 60.0

_LAUNCH = 'py=/usr/bin/python3; [ -x "$py" ] || py="$4"; exec "$py" "$1/probes/c0_probe.py" --toolbox "$1" --repo "$2" --out "$3" --python "$4" --timeout "$5"'


def c0_env() -> dict[str, str]:
    """The probe's environment: system PATH only (nothing of the agent's shell), English."""
    return {"PATH": SYSTEM_PATH, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}


def run_c0(sandbox: Sandbox, toolbox_path: str, repo_dir: str, python_path: str, timeout_s: float = 600) -> dict | None:
    """The probe's raw record (a dict), or None when it left none. Never raises for probe failures.

    `timeout_s` bounds the whole exec in seconds; pyright itself gets `timeout_s - RESERVE_S`
    (at least half of it) and a pyright timeout is recorded in the record.
    """
    out = posixpath.join(toolbox_path, "out", f"c0-{uuid.uuid4().hex[:12]}.json")
    pyright_timeout = max(timeout_s - RESERVE_S, timeout_s / 2)
    argv = ["sh", "-c", _LAUNCH, "c0", toolbox_path, repo_dir, out, python_path, f"{pyright_timeout:g}"]
    try:
        result = sandbox.exec(argv, timeout=timeout_s, env=c0_env())
    except Exception as exc:  # noqa: BLE001 - a gone sandbox is reported by the caller's health checks
        log.warning("C0 probe could not run: %s", exc)
        return None
    try:
        data = json.loads(sandbox.read_bytes(out))
    except Exception as exc:  # noqa: BLE001 - missing or torn record
        log.warning("C0 probe left no record (exit %s, %s): %s | %s",
                    result.exit_code, type(exc).__name__, exc, result.output.strip()[-300:])
        return None
    return data if isinstance(data, dict) else None
