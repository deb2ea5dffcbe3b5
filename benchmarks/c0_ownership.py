"""C0 probe time with and without the ownership check, on demo tasks with honest environments.

For numpy-trainer (a venv with numpy, a wheel this machine's pip downloads) and torch-tiny (a venv with the CPU torch
wheel from /opt/wheels without its dependencies, the largest RECORD of the demo tasks), runs in one sandbox, alternately,
N times (default 5): the C0 probe without the check (probes/c0_probe.py as committed at REV,
default the merge base with main: the probe before the check) and the current one. Prints the
medians of the whole probe (seconds, in the sandbox), of pyright's analysis alone, of the rest
(interpreter query, search-path run, AST scan, ownership: less noisy than the totals on a busy
machine), and of the ownership step (`import_owners_duration_s`).
Usage: python benchmarks/c0_ownership.py [N] [REV]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from reb_ray.grading.c0 import grade_c0
from reb_ray.suite.load import load_suite
from reb_ray.probing.c0 import c0_env
from reb_ray.probing.record import run_json_probe
from reb_ray.probing.toolbox import install_toolbox
from reb_ray.sandbox import SandboxConfig
from reb_ray.sandbox.docker.docker_client import connect
from reb_ray.sandbox.docker.docker_sandbox import DockerSandbox
from reb_ray.sandbox.docker.image import build_image

ROOT = Path(__file__).resolve().parents[1]
TORCH = sorted(Path("/opt/wheels").glob("torch-*.whl"))


def _probe(sb, toolbox: str, script: str, python: str) -> dict:
    launch = 'exec /usr/bin/python3 "$1" --toolbox "$2" --repo /work/repo --out "$3" --python "$4" --timeout 500'
    data, _ = run_json_probe(sb, "c0", toolbox, lambda out: ["sh", "-c", launch, "c0", script, toolbox, out, python],
                             600, c0_env())
    assert data is not None and data.get("pyright") is not None, data
    return data


def bench(task_id: str, wheel: Path, n: int, old_source: str, image: str) -> None:
    task = next(t for t in load_suite("demo") if t.id == task_id)
    with DockerSandbox(SandboxConfig(image=image, sweep_id="bench"), connect()) as sb:
        sb.put(ROOT / "tasks" / "demo" / task_id / "repo", "/work/repo")
        sb.put(wheel, f"/tmp/{wheel.name}")
        setup = f"python3 -m venv /opt/h && /opt/h/bin/pip install -q --no-index --no-deps /tmp/{wheel.name}"
        res = sb.exec(["bash", "-c", setup], timeout=900)
        assert res.ok, res.output[-2000:]
        toolbox = install_toolbox(sb)
        old = f"{toolbox}/probes/c0_probe_before.py"
        sb.write_bytes(old, old_source.encode())
        times: dict[str, list[float]] = {"before": [], "after": [], "pyright_before": [], "pyright_after": [], "owners": []}
        for _ in range(n):
            for label, script in (("before", old), ("after", f"{toolbox}/probes/c0_probe.py")):
                rec = _probe(sb, toolbox, script, "/opt/h/bin/python")
                times[label].append(rec["duration_s"])
                times[f"pyright_{label}"].append(rec["pyright_duration_s"])
                times.setdefault(f"rest_{label}", []).append(rec["duration_s"] - rec["pyright_duration_s"])
                if label == "after":
                    times["owners"].append(rec["import_owners_duration_s"])
                    graded = grade_c0(rec, task.c0_baseline_total)
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"{task_id}: C0 probe median over {n}: before {med['before']:.2f} s, after {med['after']:.2f} s "
              f"(pyright {med['pyright_before']:.2f} / {med['pyright_after']:.2f} s, the rest "
              f"{med['rest_before']:.2f} / {med['rest_after']:.2f} s); ownership step "
              f"{med['owners']:.3f} s; c0_missing {graded['c0_missing']}, c0_unowned {graded['c0_unowned']}")


def main(n: int = 5, rev: str | None = None) -> None:
    rev = rev or subprocess.run(["git", "merge-base", "HEAD", "main"], cwd=ROOT, capture_output=True, text=True,
                                check=True).stdout.strip()
    old_source = subprocess.run(["git", "show", f"{rev}:probes/c0_probe.py"], cwd=ROOT, capture_output=True,
                                text=True, check=True).stdout
    image = build_image(connect(), "minimal").tag
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "--no-deps",
                        "--python-version", "3.11", "--platform", "manylinux_2_28_x86_64", "--platform",
                        "manylinux2014_x86_64", "numpy", "-d", tmp], check=True)
        bench("numpy-trainer", next(Path(tmp).glob("numpy-*.whl")), n, old_source, image)
    if TORCH:
        bench("torch-tiny", TORCH[0], n, old_source, image)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5, sys.argv[2] if len(sys.argv) > 2 else None)
