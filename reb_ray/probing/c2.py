"""Host side of the C2 probe: run probes/c2_probe.py in the sandbox and read its JSON record back.

The probe runs under the report's interpreter itself (it must import the agent's framework),
with the system PATH only and `CUDA_VISIBLE_DEVICES` set to the sandbox's assigned devices,
which inside a Docker sandbox are numbered from 0 (the container sees only its own devices; the
host's CUDA_VISIBLE_DEVICES is never forwarded). Grading is separate and pure (reb_ray.grading.c2.grade_c2).
"""

from __future__ import annotations

import posixpath

from reb_ray.probing.c0 import c0_env
from reb_ray.probing.record import run_json_probe
from reb_ray.sandbox import Sandbox


#: Seconds kept back from the exec deadline for the supervisor's own work (driver facts, writing
#: the record), so that a hanging CUDA init ends as a recorded worker timeout, not a lost record.
RESERVE_S = 20.0
STDOUT_TAIL_CHARS = 2000


def c2_env(visible_gpus: str) -> dict[str, str]:
    """The probe's environment: C0's (system PATH, English, no bytecode) plus the visible GPUs."""
    return {**c0_env(), "CUDA_VISIBLE_DEVICES": visible_gpus}


#: Seconds the C2 probe may take at most (its whole exec), unless the caller says otherwise.
C2_TIMEOUT_S = 300.0


def run_c2(sandbox: Sandbox, toolbox_path: str, python_path: str, visible_gpus: str,
           timeout_s: float = C2_TIMEOUT_S) -> dict | None:
    """The probe's raw record (a dict), or None when it left none. Never raises for probe failures.

    `toolbox_path` is what `install_toolbox` returned; `python_path` the report's interpreter
    (absolute path in the sandbox); `visible_gpus` a comma list of sandbox-local device indices
    ("0", "0,1"; "" hides every GPU). `timeout_s` bounds the whole exec in seconds; the probe's
    worker (import + kernel) gets `timeout_s - RESERVE_S` (at least half of it), and a worker
    timeout is recorded in the record. The exec's output tail is added as "stdout_tail".
    None when the interpreter does not exist or does not run, or the sandbox is gone.
    """
    worker_timeout = max(timeout_s - RESERVE_S, timeout_s / 2)
    script = posixpath.join(toolbox_path, "probes", "c2_probe.py")
    data, result = run_json_probe(
        sandbox, "c2", toolbox_path,
        lambda out: [python_path, script, "--out", out, "--timeout", f"{worker_timeout:g}"],
        timeout_s, c2_env(visible_gpus))
    if data is None:
        return None
    if result.output:
        data["stdout_tail"] = result.output[-STDOUT_TAIL_CHARS:]
    return data
