"""The unit tier (`-m "not integration"`): what uses Docker, Ray or a daemon is left out of it by
its markers and fixtures, and what is left cannot reach Docker or start Ray by accident."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def collect(*args: str) -> list[str]:
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 5), done.stdout[-2000:] + done.stderr[-2000:]
    return [line for line in done.stdout.splitlines() if "::" in line]


def test_docker_parametrised_and_fixture_using_tests_are_integration(slow_process):
    unit = collect("-m", "not integration", "tests/test_trial.py", "tests/sandbox/test_conformance.py")
    everything = collect("tests/test_trial.py", "tests/sandbox/test_conformance.py")
    assert any("[local]" in item or "-local]" in item for item in unit)
    assert not any("[docker]" in item or "-docker]" in item for item in unit)
    # a test that takes the sandbox image (the Docker daemon) is integration even without a marker
    assert "tests/test_trial.py::test_a_fork_bomb_is_the_agents_pids_limit_failure" in everything
    assert "tests/test_trial.py::test_a_fork_bomb_is_the_agents_pids_limit_failure" not in unit
    assert "tests/test_trial.py::test_sandbox_limits_are_on_by_default" in unit
    # a test that declares a heavy real process (a whole trial with pyright and the probes) too
    assert "tests/test_trial.py::test_rows_keep_all_evidence_of_a_chatty_trial[local]" in everything
    assert "tests/test_trial.py::test_rows_keep_all_evidence_of_a_chatty_trial[local]" not in unit


def test_the_unit_tier_points_docker_nowhere_and_refuses_ray(tmp_path, slow_process):
    probe = tmp_path / "test_probe_tier.py"
    probe.write_text(
        "import os\n"
        "import pytest\n"
        "def test_docker_host():\n"
        "    assert os.environ['DOCKER_HOST'].startswith('unix:///nonexistent/')\n"
        "def test_ray_refused():\n"
        "    import ray\n"
        "    with pytest.raises(RuntimeError, match='mark this test `integration`'):\n"
        "        ray.init(address='local')\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not integration",
                           "-p", "tests.conftest", str(probe)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert "2 passed" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
