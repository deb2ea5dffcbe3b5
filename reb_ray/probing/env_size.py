"""Host side of the env-size probe: run probes/env_size.py in the sandbox, parse its JSON."""

from __future__ import annotations

import json

from reb_ray.sandbox import Sandbox


def run_env_size(sandbox: Sandbox, toolbox_path: str, python_path: str, timeout_s: float = 600) -> dict:
    """{status, env_size_bytes, env_size_apparent_bytes, prefix, reason}; sizes in bytes, both
    from one walk of sys.prefix: env_size_bytes counts each inode once (reb-ray's disk measure),
    env_size_apparent_bytes every regular-file path (the release's measure: a hard-linked file
    once per path; the paper CSV's env_size_avg_gb).

    The walker runs under the image's python3 (the agent's interpreter only answers
    `sys.prefix`); status is not_run with a reason when either fails.
    """
    script = f"{toolbox_path}/probes/env_size.py"
    result = sandbox.exec(
        ["sh", "-c", 'py=/usr/bin/python3; [ -x "$py" ] || py="$2"; exec "$py" "$1" "$2"', "env-size", script, python_path],
        timeout=timeout_s,
    )
    try:
        data = json.loads(result.output.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        data = {"error": f"exit {result.exit_code}: {result.output.strip()[-200:]}"}
    if "error" in data:
        return {"status": "not_run", "env_size_bytes": None, "env_size_apparent_bytes": None, "prefix": None, "reason": data["error"]}
    return {
        "status": "success",
        "env_size_bytes": data["unique_bytes"],
        "env_size_apparent_bytes": data["apparent_bytes"],
        "prefix": data["prefix"],
        "reason": None,
    }
