"""Small real agents for tests: each does one scripted thing inside the sandbox."""

from __future__ import annotations

import time

from reb_ray.agents.base import Agent, AgentContext, AgentRun


class _Scripted(Agent):
    script = "true"

    def run(self, sandbox, ctx: AgentContext) -> AgentRun:
        started = time.monotonic()
        result = sandbox.exec(["sh", "-c", self.script, "agent", ctx.report_path], timeout=ctx.timeout_s, env=ctx.env)
        return AgentRun.from_exec(result, ctx.timeout_s, started)


class CrashAgent(_Scripted):
    """Dies with a Python traceback before writing anything."""

    script = "python3 -c 'raise SystemExit(\"agent crashed: out of ideas\")'"


class SilentAgent(_Scripted):
    """Exits 0 but never writes the report."""

    script = "echo 'I am done'"


class GarbageReportAgent(_Scripted):
    """Writes a report that is not valid JSON."""

    script = 'mkdir -p "$(dirname "$1")" && echo "{python_path: nope" > "$1"'


class SleepyAgent(_Scripted):
    """Sleeps for five minutes: a trial that is surely running when the driver is killed."""

    script = "sleep 300"


class KillInitAgent(_Scripted):
    """Writes a plausible report, then stops the container's init (field case F15a)."""

    script = ('mkdir -p "$(dirname "$1")" && printf \'{"python_path": "/usr/bin/python3", "python_version": null, '
              '"torch_version": null, "cuda_available": null, "gpu_count": null, "ddp_expected_ok": null, '
              '"env_tool": "system", "env_name": null, "notes": null}\' > "$1" && kill -TERM 1; sleep 5')
