"""The witness's cost per command stage: a demo stage run with and without it, median of N.

Opens one Docker sandbox with the demo task's repository at its pinned commit and a venv holding
its requirements (from /opt/wheels, else the index), installs the probe toolbox and the task's
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
from reb_ray.models.suite import load_suite  # noqa: E402
from reb_ray.placement import place_repo  # noqa: E402
from reb_ray.probe_phase import _with_env, probe_env  # noqa: E402
from reb_ray.models.sweep import SweepConfig, TrialSpec  # noqa: E402
from reb_ray.probes.command import run_stage_command  # noqa: E402
from reb_ray.probes.task_helpers import install_task_helpers  # noqa: E402
from reb_ray.probes.toolbox import install_toolbox  # noqa: E402
from reb_ray.probes.witness import arm, collect  # noqa: E402
from reb_ray.sandbox import SandboxConfig, open_sandbox  # noqa: E402
from reb_ray.sandbox.docker_client import connect  # noqa: E402
from reb_ray.sandbox.image import build_image  # noqa: E402

WHEELS = Path("/opt/wheels")
VENV = "/opt/envs/bench"


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    task_id = sys.argv[2] if len(sys.argv) > 2 else "numpy-trainer"
    task = next(t for t in load_suite("demo") if t.id == task_id)
    image = build_image(connect(), "minimal").tag
    workspace = Path(tempfile.mkdtemp(prefix="reb-ray-bench-"))
    placed = place_repo(task, workspace)
    mounts = {str(WHEELS): "/opt/reb-ray/wheelhouse/0"} if WHEELS.is_dir() else {}
    sandbox = open_sandbox("docker", SandboxConfig(image=image, mounts=mounts), trusted=False)
    try:
        repo = f"{sandbox.workdir}/repo"
        sandbox.put(placed.path, repo)
        links = "--no-index --find-links /opt/reb-ray/wheelhouse/0" if mounts else ""
        setup = sandbox.exec(["sh", "-c", f"python3 -m venv {VENV} && {VENV}/bin/pip install -q {links} -r requirements.txt "
                                          f"&& {{ [ ! -f pyproject.toml ] || {VENV}/bin/pip install -q {links} -e '.[cli]'; }}"],
                             timeout=900, workdir=repo)
        assert setup.ok, setup.output[-2000:]
        toolbox = install_toolbox(sandbox)
        spec = TrialSpec(sweep_id="bench", agent="noop", task=task, trial_index=0, config=SweepConfig(wheelhouses=[]))
        env = {**probe_env(spec), **install_task_helpers(sandbox, task, toolbox)}
        python, shim, stage = f"{VENV}/bin/python", f"{toolbox}/bin", task.stages.cpu
        plain, witnessed = [], []
        for i in range(2 * n):
            started = time.perf_counter()
            if i % 2 == 0:
                result = run_stage_command(sandbox, _with_env(stage, env), repo, python, shim)
                plain.append(time.perf_counter() - started)
            else:
                w = arm(sandbox, toolbox, python, repo)
                result = run_stage_command(sandbox, _with_env(stage, env, w), repo, python, shim)
                verdict = grade_witness(collect(sandbox, toolbox, w, python, placed.commit))
                witnessed.append(time.perf_counter() - started)
                assert verdict["witness_status"] == "valid", verdict
            assert result.ok, result.output[-2000:]
    finally:
        sandbox.close()
    p, w = statistics.median(plain), statistics.median(witnessed)
    print(f"{task_id} C1, {n} runs each: plain median {p:.3f} s (min {min(plain):.3f}, max {max(plain):.3f}); "
          f"witnessed median {w:.3f} s (min {min(witnessed):.3f}, max {max(witnessed):.3f})")
    print(f"witness cost per stage: {w - p:+.3f} s")
    print(f"witnessed / plain: {w / p:.2f}x")


if __name__ == "__main__":
    main()
