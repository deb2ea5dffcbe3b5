"""Host side of the start-up probe: run probes/startup_probe.py in the sandbox, read its JSON back.

The probe runs under the image's `/usr/bin/python3` (any `python3` on the system PATH when the
agent removed it; the report's interpreter only as a last resort), before any other probe runs
the report's interpreter. Grading is separate and pure (reb_ray.grading.startup).
"""

from __future__ import annotations

import posixpath

from reb_ray.probing.facts import facts_env
from reb_ray.probing.record import run_json_probe
from reb_ray.sandbox import Sandbox

#: Seconds for the interpreter's `-S` query inside the probe.
QUERY_TIMEOUT_S = 60.0

_LAUNCH = ('py=/usr/bin/python3; [ -x "$py" ] || py=$(command -v python3) || py=""; [ -n "$py" ] || py="$3"; '
           'exec "$py" "$1" --python "$3" --out "$2" --timeout "$4"')


def run_startup(sandbox: Sandbox, toolbox_path: str, python_path: str, timeout_s: float = 120) -> dict | None:
    """The probe's raw record (a dict), or None when it left none. Never raises."""
    script = posixpath.join(toolbox_path, "probes", "startup_probe.py")
    data, _result = run_json_probe(
        sandbox, "startup", toolbox_path,
        lambda out: ["sh", "-c", _LAUNCH, "startup", script, out, python_path, f"{min(QUERY_TIMEOUT_S, timeout_s / 2):g}"],
        timeout_s, facts_env())
    return data
