"""Running an in-sandbox probe that writes one JSON record, and reading the record back."""

from __future__ import annotations

import json
import logging
import posixpath
import uuid
from typing import Callable, Mapping

from reb_ray.sandbox import ExecResult, Sandbox

log = logging.getLogger(__name__)


def run_json_probe(sandbox: Sandbox, name: str, toolbox_path: str, argv_for: Callable[[str], list[str]],
                   timeout_s: float, env: Mapping[str, str]) -> tuple[dict | None, ExecResult | None]:
    """Exec `argv_for(out_path)` (at most `timeout_s` seconds) and load the JSON object the probe
    wrote at `out_path` under the toolbox. Returns (record or None, exec result or None); never
    raises: a gone sandbox is reported by the caller's health checks, a missing or torn record
    is logged and gives None.
    """
    out = posixpath.join(toolbox_path, "out", f"{name}-{uuid.uuid4().hex[:12]}.json")
    try:
        result = sandbox.exec(argv_for(out), timeout=timeout_s, env=dict(env))
    except Exception as exc:  # noqa: BLE001
        log.warning("%s probe could not run: %s", name, exc)
        return None, None
    try:
        data = json.loads(sandbox.read_bytes(out))
    except Exception as exc:  # noqa: BLE001
        log.warning("%s probe left no record (exit %s, %s): %s | %s",
                    name, result.exit_code, type(exc).__name__, exc, result.output.strip()[-300:])
        return None, result
    return (data if isinstance(data, dict) else None), result
