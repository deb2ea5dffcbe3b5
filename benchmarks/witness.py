"""The witness's cost per command stage: a demo stage run with and without it, median of N.

Opens one Docker sandbox configured as a trial's (wheelhouse /opt/wheels when present) with the
demo task's repository at its pinned commit and a venv holding its requirements, installs the probe toolbox and the task's
helpers as the probe phase does, then runs the task's C1 command N times (default 10) each way,
alternating: plain (`run_stage_command`, as before the witness) and witnessed (arm the hook, run
with its environment, collect the record; the verdict is checked to be valid). Seconds are wall
time around those calls. The last line is the ratio, e.g. `witnessed / plain: 1.35x`.

Usage: python benchmarks/witness.py [N] [TASK]   (TASK: a demo task id, default numpy-trainer)
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's reb_ray, not an installed one

from reb_ray.grading.witness import grade_witness  # noqa: E402
from reb_ray.suite.load import load_suite  # noqa: E402
from reb_ray.suite.placement import place_repo  # noqa: E402
from reb_ray.trial.probe_phase import _with_env, probe_env  # noqa: E402
from reb_ray.models.sweep import SweepConfig, TrialSpec  # noqa: E402
from reb_ray.probing.command import run_stage_command  # noqa: E402
from reb_ray.probing.task_helpers import install_task_helpers  # noqa: E402
from reb_ray.probing.toolbox import install_toolbox  # noqa: E402
from reb_ray.probing.witness import arm, collect  # noqa: E402
from reb_ray.sandbox import open_sandbox  # noqa: E402
from reb_ray.trial.prepare import sandbox_config  # noqa: E402
from reb_ray.sandbox.docker.docker_client import connect  # noqa: E402
from reb_ray.sandbox.docker.image import build_image  # noqa: E402

WHEELS = Path("/opt/wheels")
VENV = "/opt/envs/bench"


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    task_id = sys.argv[2] if len(sys.argv) > 2 else "numpy-trainer"
    task = next(t for t in load_suite("demo") if t.id == task_id)
    image = build_image(connect(), "minimal").tag
    workspace = Path(tempfile.mkdtemp(prefix="reb-ray-bench-"))
    placed = place_repo(task, workspace)
    spec = TrialSpec(sweep_id="bench", agent="noop", task=task, trial_index=0, image=image,
                     config=SweepConfig(wheelhouses=[WHEELS] if WHEELS.is_dir() else [], pip_cache=False))
    config, pip_env = sandbox_config(spec, [])  # as a trial's sandbox: wheelhouse, CA bundle, network
    sandbox = open_sandbox("docker", config, trusted=False)
    try:
        repo = f"{sandbox.workdir}/repo"
        sandbox.put(placed.path, repo)
        setup = sandbox.exec(["sh", "-c", f"python3 -m venv {VENV} && {{ [ ! -f requirements.txt ] || {VENV}/bin/pip install -q -r requirements.txt; }} "
                                          f"&& {{ [ ! -f pyproject.toml ] || {VENV}/bin/pip install -q -e '.[cli]'; }}"],
                             timeout=900, workdir=repo, env=pip_env)
        assert setup.ok, setup.output[-2000:]
        toolbox = install_toolbox(sandbox)
        env = {**probe_env(spec), **install_task_helpers(sandbox, task, toolbox)}
        python, shim, stage = f"{VENV}/bin/python", f"{toolbox}/bin", task.stages.cpu
        plain, witnessed, parts = [], [], {"arm": [], "command (hooked)": [], "collect": []}
        for i in range(2 * n):
            started = time.perf_counter()
            if i % 2 == 0:
                result = run_stage_command(sandbox, _with_env(stage, env), repo, python, shim)
                plain.append(time.perf_counter() - started)
            else:
                w = arm(sandbox, toolbox, python, repo)
                armed = time.perf_counter()
                result = run_stage_command(sandbox, _with_env(stage, env, w), repo, python, shim)
                ran = time.perf_counter()
                verdict = grade_witness(collect(sandbox, toolbox, w, python, placed.commit))
                witnessed.append(time.perf_counter() - started)
                parts["arm"].append(armed - started)
                parts["command (hooked)"].append(ran - armed)
                parts["collect"].append(time.perf_counter() - ran)
                assert verdict["witness_status"] == "valid", verdict
            assert result.ok, result.output[-2000:]
    finally:
        sandbox.close()
    p, w = statistics.median(plain), statistics.median(witnessed)
    print(f"{task_id} C1, {n} runs each: plain median {p:.3f} s (min {min(plain):.3f}, max {max(plain):.3f}); "
          f"witnessed median {w:.3f} s (min {min(witnessed):.3f}, max {max(witnessed):.3f})")
    print("witnessed parts, medians: " + ", ".join(f"{k} {statistics.median(v):.3f} s" for k, v in parts.items()))
    print(f"witness cost per stage: {w - p:+.3f} s")
    print(f"witnessed / plain: {w / p:.2f}x")


if __name__ == "__main__":
    main()
