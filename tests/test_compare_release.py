"""scripts/compare_release.py on a tiny release layout written here (never the fetched release):
it finds an undocumented difference, takes one only as covered when the stage's deviation names
the element, reads a bare git directory as well as a checkout, and exits 1 / 0 accordingly."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from reb_ray.testing.suite import off, write_task

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "compare_release.py"
COMMIT = "0123456789abcdef0123456789abcdef01234567"

RUNNER = "import argparse\np = argparse.ArgumentParser()\n" + "".join(
    f'p.add_argument("{name}")\n' for name in ("--stage", "--task", "--out-dir", "--timeout-sec", "--framework",
                                               "--env", "--decision-reason", "--skip", "--skip-reason"))
CPU_SCRIPT = '''#!/usr/bin/env bash
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python "$repo_root/benchmark_scripts/runner.py" \\
  --stage cpu --task train --out-dir "$repo_root/build_output/cpu" --timeout-sec 600 --framework pytorch \\
  --env "PYTHONPATH=$repo_root" \\
  --env "CUDA_VISIBLE_DEVICES=" \\
  --decision-reason "one step of train.py on the CPU" \\
  -- python train.py --steps 1 --input-size 224 --precision fp32
'''
SKIP_SCRIPT = '''#!/usr/bin/env bash
python benchmark_scripts/runner.py --stage single_gpu --skip --skip-reason repo_not_supported
'''
CATEGORIES = ("repo_slug,supports_cpu,supports_single_gpu,supports_multi_gpu\n"
              "Acme@Widget,yes,no,no\n")


def write_release(root: Path) -> Path:
    bench = root / "scripts" / "Acme@Widget" / "benchmark_scripts"
    bench.mkdir(parents=True)
    (bench / "runner.py").write_text(RUNNER)
    (bench / "run_cpu_entrypoint.sh").write_text(CPU_SCRIPT)
    (bench / "run_single_gpu_entrypoint.sh").write_text(SKIP_SCRIPT)
    (bench / "run_multi_gpu_entrypoint.sh").write_text(SKIP_SCRIPT.replace("single_gpu", "multi_gpu"))
    (root / "scripts_repos_test_categories.csv").write_text(CATEGORIES)
    return root


def write_spec(tasks: Path, command: str, timeout_s: int = 600, deviation: str | None = None,
               env: str = "") -> None:
    """The suite directory `tasks` with one task, acme--widget: Acme/Widget with this CPU stage and
    the release's skipped GPU stages."""
    cpu = [f"command = {json.dumps(command)}", f"timeout_s = {timeout_s}"]
    if env:
        cpu.append(f"env = {{ {env} }}")
    if deviation is not None:
        cpu.append(f"deviation = {json.dumps(deviation)}")
    write_task(tasks.parent, tasks.name, "acme--widget", category="1_cpu", git=("https://github.com/Acme/Widget", COMMIT),
               cpu="\n".join(cpu), single_gpu=off("repo_not_supported"), multi_gpu=off("repo_not_supported"))


def compare(release: Path, tasks: Path) -> tuple[int, dict]:
    res = subprocess.run([sys.executable, str(SCRIPT), str(release), "--tasks", str(tasks), "--json"],
                         capture_output=True, text=True, timeout=120)
    assert res.stderr == "", res.stderr
    return res.returncode, json.loads(res.stdout)


def differences(report: dict) -> dict[str, bool]:
    """{difference text: covered} of the cpu stage."""
    (cpu,) = [row for row in report["stages"] if row["stage"] == "cpu"]
    return {d["text"]: d["covered"] for d in cpu["differences"]}


def test_an_undocumented_difference_is_reported_and_fails(tmp_path):
    release = write_release(tmp_path / "release")
    write_spec(tmp_path / "tasks", "python train.py --steps 1 --precision fp16", timeout_s=900)
    rc, report = compare(release, tmp_path / "tasks")
    found = differences(report)
    assert rc == 1
    assert found == {
        "timeout: release 600 s, spec 900 s": False,
        "env PYTHONPATH=.: release sets it, spec does not": False,
        "option --input-size=224: release passes it, spec does not": False,
        "option --precision: release fp32, spec fp16": False,
    }
    # the skipped stages agree with the release's table; CUDA_VISIBLE_DEVICES is the harness's
    assert report["counts"] == {"stages": 3, "identical": 2, "covered": 0, "undocumented_stages": 1,
                                "undocumented": 4, "deviations": 0, "missing_release": 0}


def test_a_deviation_covers_only_the_elements_it_names(tmp_path):
    release = write_release(tmp_path / "release")
    write_spec(tmp_path / "tasks", "python train.py --steps 1 --precision fp32",
               deviation="--input-size is left at the default (the checkpoint was trained at 518)")
    rc, report = compare(release, tmp_path / "tasks")
    assert rc == 1
    assert differences(report) == {"env PYTHONPATH=.: release sets it, spec does not": False,
                                   "option --input-size=224: release passes it, spec does not": True}


def test_a_stage_whose_differences_are_all_named_passes(tmp_path):
    release = write_release(tmp_path / "release")
    write_spec(tmp_path / "tasks", "python train.py --steps 1 --precision fp32", env='PYTHONPATH = "."',
               deviation="--input-size is left at the default (the checkpoint was trained at 518)")
    rc, report = compare(release, tmp_path / "tasks")
    assert rc == 0, report
    assert report["counts"]["covered"] == 1 and report["counts"]["undocumented"] == 0
    # and the same spec without the deviation is caught again
    write_spec(tmp_path / "tasks", "python train.py --steps 1 --precision fp32", env='PYTHONPATH = "."')
    assert compare(release, tmp_path / "tasks")[0] == 1


def test_a_bare_git_directory_is_read_without_writing_into_it(tmp_path):
    work = write_release(tmp_path / "work")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "-q", str(work)], check=True)
    subprocess.run([*git, "-C", str(work), "add", "-A"], check=True)
    subprocess.run([*git, "-C", str(work), "commit", "-qm", "release"], check=True)
    bare = tmp_path / "release.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    before = sorted(p.relative_to(bare) for p in bare.rglob("*"))
    write_spec(tmp_path / "tasks", "PYTHONPATH=$PWD python train.py --steps 1 --input-size 224 --precision fp32")
    rc, report = compare(bare, tmp_path / "tasks")
    head = subprocess.run(["git", "--git-dir", str(bare), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    assert rc == 0 and report["release_commit"] == head.strip()
    assert report["counts"]["identical"] == 3
    assert sorted(p.relative_to(bare) for p in bare.rglob("*")) == before


def test_text_output_prints_both_sides_and_the_counts(tmp_path):
    release = write_release(tmp_path / "release")
    write_spec(tmp_path / "tasks", "python train.py --steps 1 --precision fp32")
    res = subprocess.run([sys.executable, str(SCRIPT), str(release), "--tasks", str(tmp_path / "tasks")],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 1
    assert "== acme--widget cpu" in res.stdout
    assert "UNDOCUMENTED option --input-size=224: release passes it, spec does not" in res.stdout
    assert "release: --input-size=224 --precision=fp32 --steps=1" in res.stdout
    assert "spec:    --precision=fp32 --steps=1" in res.stdout
    assert res.stdout.rstrip().endswith("undocumented differences: 2  stages with a deviation: 0")
