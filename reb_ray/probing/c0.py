"""Host side of the C0 probe: run probes/c0_probe.py in the sandbox and read its JSON record back.

The probe runs under the image's `/usr/bin/python3` (falling back to the report interpreter
when the agent removed it) with the toolbox's own node and pyright, against the report's
interpreter. Grading is separate and pure (reb_ray.grading.c0.grade_c0).
"""

from __future__ import annotations


from reb_ray.probing.record import run_json_probe
from reb_ray.sandbox import Sandbox
from reb_ray.sandbox.base import SYSTEM_PATH


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
    pyright_timeout = max(timeout_s - RESERVE_S, timeout_s / 2)
    data, _result = run_json_probe(
        sandbox, "c0", toolbox_path,
        lambda out: ["sh", "-c", _LAUNCH, "c0", toolbox_path, repo_dir, out, python_path, f"{pyright_timeout:g}"],
        timeout_s, c0_env())
    return data
