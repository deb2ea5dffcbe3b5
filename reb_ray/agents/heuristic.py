"""`heuristic`: the offline, deterministic rule-based baseline agent.

Host side only: copies `heuristic_script.py` and its import scan `heuristic_imports.py` (both
stdlib-only) into the sandbox and runs the script with the image's python3. The script reads
requirements files, pyproject / setup.cfg / setup.py and environment.yml pip entries, builds a
venv, installs, resolves leftover imports through a module-to-distribution map (never a name
the repository defines itself), and writes an honest report from real checks.
"""

from __future__ import annotations

import time
from pathlib import Path

from reb_ray.agents.base import Agent, AgentContext, AgentRun
from reb_ray.sandbox import Sandbox

SCRIPT = Path(__file__).with_name("heuristic_script.py")
IMPORTS = Path(__file__).with_name("heuristic_imports.py")  # imported by SCRIPT from its own folder
VENV = "/opt/envs/heuristic"


class HeuristicAgent(Agent):
    name = "heuristic"
    trusted = True
    calls_no_model = True

    def run(self, sandbox: Sandbox, ctx: AgentContext) -> AgentRun:
        started = time.monotonic()
        script_path = f"{ctx.repo_dir}/../.reb-ray-agent/heuristic_script.py"
        venv = VENV if sandbox.capabilities.fixed_paths else f"{ctx.repo_dir}/../envs/heuristic"
        sandbox.put(SCRIPT, script_path)
        sandbox.put(IMPORTS, script_path.replace("heuristic_script.py", "heuristic_imports.py"))
        result = sandbox.exec(
            ["python3", script_path, "--repo", ctx.repo_dir, "--report", ctx.report_path, "--venv", venv],
            timeout=ctx.timeout_s, env=ctx.env,
        )
        return AgentRun.from_exec(result, ctx.timeout_s, started)
