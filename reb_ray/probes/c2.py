"""Host side of the C2 probe: run probes/c2_probe.py in the sandbox and read its JSON record back.

The probe runs under the report's interpreter itself (it must import the agent's framework),
with the system PATH only and `CUDA_VISIBLE_DEVICES` set to the sandbox's assigned devices,
which inside a Docker sandbox are numbered from 0 (ARCHITECTURE.md, step 2: the host's value is
never forwarded). Grading is separate and pure (reb_ray.grading.c2.grade_c2).
"""

from __future__ import annotations

import json
import logging
import posixpath
import uuid

from reb_ray.probes.c0 import c0_env
from reb_ray.sandbox import Sandbox

log = logging.getLogger(__name__)

#: Seconds kept back from the exec deadline for the supervisor's own work (driver facts, writing
#: the record), so that a hanging CUDA init ends as a recorded worker timeout, not a lost record.
RESERVE_S = 20.0
STDOUT_TAIL_CHARS = 2000


def c2_env(visible_gpus: str) -> dict[str, str]:
    """The probe's environment: C0's (system PATH, English, no bytecode) plus the visible GPUs."""
    return {**c0_env(), "CUDA_VISIBLE_DEVICES": visible_gpus}


def run_c2(sandbox: Sandbox, toolbox_path: str, python_path: str, visible_gpus: str, timeout_s: float = 300) -> dict | None:
    """The probe's raw record (a dict), or None when it left none. Never raises for probe failures.

    `toolbox_path` is what `install_toolbox` returned; `python_path` the report's interpreter
    (absolute path in the sandbox); `visible_gpus` a comma list of sandbox-local device indices
    ("0", "0,1"; "" hides every GPU). `timeout_s` bounds the whole exec in seconds; the probe's
    worker (import + kernel) gets `timeout_s - RESERVE_S` (at least half of it), and a worker
    timeout is recorded in the record. The exec's output tail is added as "stdout_tail".
    None when the interpreter does not exist or does not run, or the sandbox is gone.
    """
    out = posixpath.join(toolbox_path, "out", f"c2-{uuid.uuid4().hex[:12]}.json")
    worker_timeout = max(timeout_s - RESERVE_S, timeout_s / 2)
    argv = [python_path, posixpath.join(toolbox_path, "probes", "c2_probe.py"), "--out", out,
            "--timeout", f"{worker_timeout:g}"]
    try:
        result = sandbox.exec(argv, timeout=timeout_s, env=c2_env(visible_gpus))
    except Exception as exc:  # noqa: BLE001 - a gone sandbox is reported by the caller's health checks
        log.warning("C2 probe could not run: %s", exc)
        return None
    try:
        data = json.loads(sandbox.read_bytes(out))
    except Exception as exc:  # noqa: BLE001 - missing or torn record
        log.warning("C2 probe left no record (exit %s, %s): %s | %s",
                    result.exit_code, type(exc).__name__, exc, result.output.strip()[-300:])
        return None
    if not isinstance(data, dict):
        return None
    if result.output:
        data["stdout_tail"] = result.output[-STDOUT_TAIL_CHARS:]
    return data
