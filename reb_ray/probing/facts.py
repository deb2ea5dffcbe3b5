"""Host side of the facts probe (C5): run probes/facts_probe.py in the sandbox, read its JSON back.

The probe runs under the image's `/usr/bin/python3` (any `python3` on the system PATH when the
agent removed it; the report's interpreter only as a last resort) and observes the report's
interpreter without installing anything: path, permissions, version, `import torch`. Grading is
separate and pure (reb_ray.grading.c5.audit_report).
"""

from __future__ import annotations

import posixpath

from reb_ray.grading.record_types import conform
from reb_ray.grading.unmeasured import FACTS_SHAPE
from reb_ray.probing.record import run_json_probe
from reb_ray.sandbox import Sandbox
from reb_ray.sandbox.base import SYSTEM_PATH


#: Seconds each interpreter run inside the probe may take at most (version query, `import torch`).
RUN_TIMEOUT_S = 60.0
#: Seconds kept back from the exec deadline for starting the probe and writing its record.
RESERVE_S = 5.0

# $1 probe script, $2 record path, $3 interpreter under audit, $4 seconds per interpreter run,
# $5 seconds for both runs together.
_LAUNCH = (
    'py=/usr/bin/python3; [ -x "$py" ] || py=$(command -v python3) || py=""; [ -n "$py" ] || py="$3"; '
    'exec "$py" "$1" --python "$3" --out "$2" --timeout "$4" --budget "$5"'
)


def facts_env() -> dict[str, str]:
    """The probe's environment: system PATH only (nothing of the agent's shell), English."""
    return {"PATH": SYSTEM_PATH, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}


def run_budget(timeout_s: float) -> tuple[float, float]:
    """(seconds per interpreter run, seconds for both) for an exec limited to `timeout_s`.

    The torch import runs only after the version query worked (which takes well under a second
    unless the interpreter is broken), so it gets the full 60 s unless the budget is smaller.
    """
    budget = max(2.0, timeout_s - RESERVE_S)
    return min(RUN_TIMEOUT_S, budget / 2 if budget < RUN_TIMEOUT_S else budget - 1.0), budget


def run_facts(sandbox: Sandbox, toolbox_path: str, python_path: str, timeout_s: float = 120) -> dict | None:
    """The probe's raw record (a dict), or None when it left none. Never raises.

    `timeout_s` bounds the whole exec in seconds; each interpreter run inside the probe gets at
    most 60 s and both together `timeout_s - RESERVE_S` (see run_budget), and a run that exceeds
    its limit is recorded as timed out in the record rather than losing the record.
    """
    per_run, budget = run_budget(timeout_s)
    script = posixpath.join(toolbox_path, "probes", "facts_probe.py")
    data, _result = run_json_probe(
        sandbox, "facts", toolbox_path,
        lambda out: ["sh", "-c", _LAUNCH, "facts", script, out, python_path, f"{per_run:g}", f"{budget:g}"],
        timeout_s, facts_env())
    return conform(data, FACTS_SHAPE) if data is not None else None  # written by the agent's interpreter
