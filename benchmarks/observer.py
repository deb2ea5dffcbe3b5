"""The observer's cost per command stage: a demo stage run witnessed, with and without the
kernel's trace (reb_ray.probing.observer), median of N, alternating.

Opens one Docker sandbox configured as a trial's (wheelhouse /opt/wheels when present) with the
demo task's repository at its pinned commit and a venv holding its requirements, installs the
probe toolbox and the task's helpers as the probe phase does, then runs the task's C1 command
N times (default 10) each way: witnessed (arm the hook, run, collect: today's stage without
the trace) and observed (the same under the observer: arm it, run the command under its
reader and strace, collect and verify the trace; the verdict is checked to agree). Seconds are
wall time around those calls; the observed run's parts (arm, command, collect) are medians.
`--fanout K` adds K worker processes to the command (each imports the task's main dependency),
the shape of a stage with DataLoader workers or ranks. The last line is the ratio, e.g.
`observed / witnessed: 1.10x`.

Usage: python benchmarks/observer.py [N] [TASK] [--fanout K]   (TASK: a demo task id, default numpy-trainer)
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's reb_ray, not an installed one

from reb_ray.grading.witness import grade_witness, stage_entries  # noqa: E402
from reb_ray.models.sweep import SweepConfig, TrialSpec  # noqa: E402
from reb_ray.probing import observer as obs  # noqa: E402
from reb_ray.probing.command import run_stage_command  # noqa: E402
from reb_ray.probing.task_helpers import install_task_helpers  # noqa: E402
from reb_ray.probing.toolbox import install_toolbox  # noqa: E402
from reb_ray.probing.witness import arm, collect  # noqa: E402
from reb_ray.sandbox import open_sandbox  # noqa: E402
from reb_ray.sandbox.docker.docker_client import connect  # noqa: E402
from reb_ray.sandbox.docker.image import build_image  # noqa: E402
from reb_ray.suite.load import load_suite  # noqa: E402
from reb_ray.suite.placement import place_repo  # noqa: E402
from reb_ray.trial.prepare import sandbox_config  # noqa: E402
from reb_ray.trial.probe_phase import _with_env, probe_env  # noqa: E402

WHEELS = Path("/opt/wheels")
VENV = "/opt/envs/bench"
MAIN_DEP = {"torch-tiny": "torch", "numpy-trainer": "numpy", "import-name-mismatch": "yaml", "pyproject-extra": "click"}


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    fanout = int(sys.argv[sys.argv.index("--fanout") + 1]) if "--fanout" in sys.argv else 0
    if fanout:
        args = [a for a in args if a != str(fanout)]
    n = int(args[0]) if args else 10
    task_id = args[1] if len(args) > 1 else "numpy-trainer"
    task = next(t for t in load_suite("demo") if t.id == task_id)
    image = build_image(connect(), "minimal").tag
    placed = place_repo(task, Path(tempfile.mkdtemp(prefix="reb-ray-bench-")))
    spec = TrialSpec(sweep_id="bench", agent="noop", task=task, trial_index=0, image=image,
                     config=SweepConfig(wheelhouses=[WHEELS] if WHEELS.is_dir() else [], pip_cache=False))
    config, pip_env = sandbox_config(spec, [])
    sandbox = open_sandbox("docker", config, trusted=False)
    stage = task.stages.cpu
    if fanout:
        dep = MAIN_DEP.get(task_id, "json")
        spawn = (f"python -c \"import multiprocessing as m; ps=[m.get_context('spawn').Process(target=__import__, "
                 f"args=('{dep}',)) for _ in range({fanout})]; [p.start() for p in ps]; [p.join() for p in ps]\" && ")
        stage = stage.model_copy(update={"command": spawn + stage.command})
    try:
        repo = f"{sandbox.workdir}/repo"
        sandbox.put(placed.path, repo)
        setup = sandbox.exec(["sh", "-c", f"python3 -m venv {VENV} && {{ [ ! -f requirements.txt ] || {VENV}/bin/pip install -q -r requirements.txt; }} "
                                          f"&& {{ [ ! -f pyproject.toml ] || {VENV}/bin/pip install -q -e '.[cli]'; }}"],
                             timeout=900, workdir=repo, env=pip_env)
        if not setup.ok:
            print(setup.output[-2000:], file=sys.stderr)
            return 1
        toolbox = install_toolbox(sandbox)
        env = {**probe_env(spec), **install_task_helpers(sandbox, task, toolbox)}
        python, shim = f"{VENV}/bin/python", f"{toolbox}/bin"
        witnessed, observed = [], []
        parts: dict[str, list[float]] = {"arm": [], "command (traced)": [], "collect": [], "trace bytes": []}
        for i in range(2 * n):
            started = time.perf_counter()
            w = arm(sandbox, toolbox, python, repo)
            if i % 2 == 0:
                result = run_stage_command(sandbox, _with_env(stage, env, w), repo, python, shim)
                raw = collect(sandbox, toolbox, w, python, placed.commit)
                witnessed.append(time.perf_counter() - started)
            else:
                o = obs.arm(sandbox, toolbox)
                armed = time.perf_counter()
                result = run_stage_command(sandbox, _with_env(stage, env, w), repo, python, shim, wrap=o.wrap)
                ran = time.perf_counter()
                raw = collect(sandbox, toolbox, w, python, placed.commit)
                record = obs.collect(sandbox, o, raw, repo, result.duration_s)
                observed.append(time.perf_counter() - started)
                parts["arm"].append(armed - started)
                parts["command (traced)"].append(ran - armed)
                parts["collect"].append(time.perf_counter() - ran)
                parts["trace bytes"].append(float(record.get("trace_bytes") or 0))
                raw = {**(raw or {}), "observer": record, "entries": stage_entries(stage.command, stage.workdir)}
                verdict = grade_witness(raw)
                if verdict["witness_observed"] != "agrees":
                    print(f"the trace does not agree: {verdict}", file=sys.stderr)
                    return 1
            if not result.ok:
                print(result.output[-2000:], file=sys.stderr)
                return 1
    finally:
        sandbox.close()
    w, o = statistics.median(witnessed), statistics.median(observed)
    label = f"{task_id} C1" + (f" +{fanout} worker processes" if fanout else "")
    print(f"{label}, {n} runs each: witnessed median {w:.3f} s (min {min(witnessed):.3f}, max {max(witnessed):.3f}); "
          f"observed median {o:.3f} s (min {min(observed):.3f}, max {max(observed):.3f})")
    print("observed parts, medians: " + ", ".join(f"{k} {statistics.median(v):.3f}" for k, v in parts.items()))
    print(f"observer cost per stage: {o - w:+.3f} s")
    print(f"observed / witnessed: {o / w:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
