"""`noop`: installs nothing and reports the image's own interpreter.

The paper's skip-agent smoke test: it shows what the probes give for an untouched image.
Fields it did not verify are null, as the report contract requires.
"""

from __future__ import annotations

import json
import time

from reb_ray.agents.base import Agent, AgentContext, AgentRun
from reb_ray.sandbox import Sandbox

IMAGE_PYTHON = "/usr/bin/python3"


class NoopAgent(Agent):
    name = "noop"
    trusted = True
    calls_no_model = True

    def run(self, sandbox: Sandbox, ctx: AgentContext) -> AgentRun:
        started = time.monotonic()
        report = {
            "python_path": IMAGE_PYTHON,
            "python_version": None,
            "torch_version": None,
            "cuda_available": None,
            "gpu_count": None,
            "ddp_expected_ok": None,
            "env_tool": "system",
            "env_name": None,
            "notes": "noop agent: nothing installed, nothing verified",
        }
        body = json.dumps(report, indent=2)
        result = sandbox.exec(
            ["sh", "-c", 'mkdir -p "$(dirname "$1")" && printf "%s\\n" "$2" > "$1"', "noop", ctx.report_path, body],
            timeout=ctx.timeout_s, env=ctx.env,
        )
        return AgentRun.from_exec(result, ctx.timeout_s, started)
