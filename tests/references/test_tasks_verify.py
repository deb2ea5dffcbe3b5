"""`reb-ray tasks verify` for real: a local Ray sweep of `reference` and `noop` in Docker.

The demo suite ships a verified reference for each task; the shipped ones must still pass their
recorded stages (and noop none), and a reference whose lock names a version that does not exist must be
reported broken (the recipe does not rebuild) with a non-zero exit.

What is under test is what the command prints and its exit status, so it runs in the test's
process (tests/cli/in_process.py) on the module's local Ray, two trials at a time as on this
2-core machine, not as a console script starting Python and a Ray of its own per call."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from reb_ray.paths import bundled_dir
from tests.cli.in_process import run_cli

DEMO = bundled_dir("tasks") / "demo"

pytestmark = pytest.mark.timeout(600)  # the four demo tasks' eight trials, two at a time, on a busy 2-core machine


def _verify(*args: str) -> subprocess.CompletedProcess:
    return run_cli("tasks", "verify", "--quiet", "--max-concurrent", "2", *args)


def _line(out: str, task: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(task + " "))


def test_the_shipped_demo_references_pass_and_noop_passes_nothing(sandbox_image, ray_local, tmp_path):
    """`tasks verify --suite demo`, all four tasks (about 3 minutes on a loaded 2-core VM): this
    is how CI checks the suite's health."""
    proc = _verify("--suite", "demo", "--output", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for task in ("import-name-mismatch", "numpy-trainer", "pyproject-extra", "torch-tiny"):
        line = _line(proc.stdout, task)
        assert re.search(rf"{task}\s+c0 c1 c5\s+c0 c1 c5 passed\s+passes nothing\s+ok$", line), line
    assert "demo: 4 ok, 0 broken or unmeasured, 0 without a reference" in proc.stdout


def test_a_reference_whose_lock_names_a_missing_version_is_broken(sandbox_image, ray_local, tmp_path):
    root = tmp_path / "tasks"
    shutil.copytree(DEMO / "numpy-trainer", root / "demo" / "numpy-trainer")
    lock = root / "demo" / "numpy-trainer" / "reference" / "requirements.lock"
    text = lock.read_text()
    assert re.search(r"^numpy==\S+ ", text, re.M), text
    lock.write_text(re.sub(r"^numpy==\S+ ", "numpy==0.0.424242 ", text, flags=re.M))
    proc = _verify("--suite", "demo", "--tasks-root", str(root), "--output", str(tmp_path / "out"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    line = _line(proc.stdout, "numpy-trainer")
    assert "broken (reference c0 failure" in line and "reference c1 failure" in line, line
    assert "demo: 0 ok, 1 broken or unmeasured" in proc.stdout
    # The agent's log says which step of the recipe failed.
    assert "the recipe does not rebuild" in _agent_output(tmp_path / "out")


def _agent_output(output: Path) -> str:
    from reb_ray.results.read import read_trials

    rows = [r for r in read_trials(output).to_pylist() if r["agent"] == "reference"]
    return rows[0]["agent_output_tail"] or ""
