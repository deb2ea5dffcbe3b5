"""The viewer's computing children: a module of reb_ray.viewer run as its own process, whose
answer is one JSON object on its stdout.

The paper's table (`reb_ray.viewer.summary`) and the pictures (`reb_ray.viewer.pictures`) are
computed apart from the server: at 100,000 trials they hold hundreds of MB at their peak, which
the server would otherwise keep for its whole life, and pages answer meanwhile. A child prints
`{"error": "..."}` for a failure it can name (a RebRayError); anything else is a non-zero exit
whose stderr tail is the error.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from reb_ray.errors import RebRayError

#: How much of a failed child's stderr its error keeps, characters.
STDERR_TAIL = 500


def child_env() -> dict[str, str]:
    """The environment of a computing child: this code first on its path."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def start(module: str, *args: str) -> subprocess.Popen:
    """`python -m module args...` started now, its stdout and stderr piped."""
    return subprocess.Popen([sys.executable, "-m", module, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=child_env())


async def answer(proc: subprocess.Popen, what: str) -> dict:
    """The JSON object `proc` printed, once it ended (waited for in a thread). Raises
    RebRayError with the child's own error, or naming `what` ("the summary process") and its
    exit code and stderr tail, or its output when that is not JSON."""
    out, err = await asyncio.to_thread(proc.communicate)
    if proc.returncode != 0:
        raise RebRayError(f"{what} failed (exit {proc.returncode}): {err.decode(errors='replace')[-STDERR_TAIL:]}")
    try:
        result = json.loads(out)
    except ValueError as exc:
        raise RebRayError(f"{what} failed: its answer is not JSON ({exc})") from None
    if not isinstance(result, dict):
        raise RebRayError(f"{what} failed: its answer is not a JSON object")
    if "error" in result:
        raise RebRayError(str(result["error"]))
    return result
