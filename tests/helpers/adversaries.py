"""Agents that take shortcuts, as `command` agents: each runs a shell script in the repository,
then writes a report naming the interpreter it wants graded. The adversarial suites
(tests/test_witness_adversarial.py, tests/test_witness_observed.py,
tests/test_installed_adversarial.py, tests/trial/test_outside_adversaries.py) run their agents
with these helpers, on a demo task, two trials at a time."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

WHEELS = [Path("/opt/wheels")] if Path("/opt/wheels").is_dir() else []


def report(python: str, env_tool: str = "system") -> str:
    """A report naming `python` and claiming nothing else."""
    return json.dumps({"python_path": python, "python_version": None, "torch_version": None, "cuda_available": None,
                       "gpu_count": None, "ddp_expected_ok": None, "env_tool": env_tool, "env_name": None, "notes": None})


def write_file(path: str, body: str, mode: str = "755") -> str:
    """Shell that writes `body` to `path` with `mode`."""
    return f"mkdir -p {Path(path).parent} && cat > {path} <<'REBEOF'\n{body}\nREBEOF\nchmod {mode} {path}\n"


def command_specs(adversaries: dict[str, tuple[str, str]], env_tool: str = "system", shell: str = "sh") -> dict:
    """Agent specs of `adversaries` (name -> (shell script, reported python_path)): the script
    runs under `set -e` in the repository, then the report is written."""
    specs = {}
    for name, (script, python) in adversaries.items():
        write = f'mkdir -p "$(dirname "$1")" && printf "%s" {json.dumps(report(python, env_tool))} > "$1"'
        specs[name] = {"kind": "command", "command": [shell, "-c", f"set -e\n{script}\n{write}", "agent", "{report_path}"]}
    return specs


def run_adversaries(specs: dict, image: str, sweep_id: str, task_id: str = "numpy-trainer",
                    pip_cache: bool = False) -> dict:
    """{name: TrialOutcome} of every agent of `specs` on the demo task `task_id`, two at a time;
    no environment kept (nothing here is about keeping, and a kept image would outlive the test).
    `pip_cache`: the node's package cache shared, where an agent takes its wheels from it."""
    from reb_ray.models.sweep import SweepConfig, TrialSpec
    from reb_ray.suite.load import load_suite
    from reb_ray.trial.run import run_trial

    config = SweepConfig(wheelhouses=WHEELS, pip_cache=pip_cache, agent_specs=specs, keep_environments="none")
    task = next(t for t in load_suite("demo") if t.id == task_id)

    def one(agent: str):
        return run_trial(TrialSpec(sweep_id=sweep_id, agent=agent, task=task, trial_index=0, config=config, image=image))

    names = list(specs)
    with ThreadPoolExecutor(2) as pool:
        return dict(zip(names, pool.map(one, names)))
