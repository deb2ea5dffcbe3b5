"""Harbor tasks end to end, against the real parts: Docker, reb-ray's sandbox, the `harbor` CLI.

One tiny Harbor task, written by the test (FROM the reb-ray sandbox image, so no registry is
needed): its oracle writes an answer, its test.sh writes a JSON reward of two metrics. It runs
through reb-ray (oracle and noop) and through the real `harbor run` (oracle), and both must read
the same reward. The task's test.sh also records whether the agent phase could see /tests
(Harbor copies tests/ in only after the agent ran; so must reb-ray). The task keeps Harbor's
default public network: `harbor run` on local Docker enforces `no-network` only through its
egress sidecar, an image it pulls from a registry (docs/harbor.md)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from reb_ray.harbor.images import BuildFailed, ensure_image
from reb_ray.harbor.task import load_harbor_task
from reb_ray.harbor.trial import run_harbor_trial

ROOT = Path(__file__).resolve().parents[2]
HARBOR = ROOT / ".venv-harbor" / "bin" / "harbor"
SOLVE = """#!/bin/sh
if [ -e /tests ]; then echo 1 > /app/saw_tests; else echo 0 > /app/saw_tests; fi
echo 42 > /app/answer
"""
TEST = """#!/bin/sh
answer=$(cat /app/answer 2>/dev/null || echo none)
saw=$(cat /app/saw_tests 2>/dev/null || echo 0)
ok=0; [ "$answer" = 42 ] && ok=1
echo "answer=$answer"
printf '{"reward": %s, "agent_saw_tests": %s}\\n' "$ok" "$saw" > /logs/verifier/reward.json
"""


def write_tiny_task(root: Path, base_image: str) -> Path:
    task = root / "tiny"
    for sub in ("environment", "tests", "solution"):
        (task / sub).mkdir(parents=True)
    (task / "task.toml").write_text('version = "1.0"\n[agent]\ntimeout_sec = 120.0\n[verifier]\ntimeout_sec = 60.0\n'
                                    '[environment]\ncpus = 1\nmemory_mb = 1024\n')
    (task / "instruction.md").write_text("Write 42 to /app/answer.\n")
    (task / "environment" / "Dockerfile").write_text(f"FROM {base_image}\nUSER root\nWORKDIR /app\n")
    (task / "solution" / "solve.sh").write_text(SOLVE)
    (task / "tests" / "test.sh").write_text(TEST)
    for script in (task / "solution" / "solve.sh", task / "tests" / "test.sh"):
        script.chmod(0o755)
    return task


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, sandbox_image):
    return load_harbor_task(write_tiny_task(tmp_path_factory.mktemp("harbor"), sandbox_image))


def test_reb_ray_runs_a_harbor_task_the_harbor_way(tiny, sandbox_image, tmp_path):
    oracle = run_harbor_trial(tiny, "oracle", tmp_path / "oracle", sandbox_image)
    assert (oracle.status, oracle.reason) == ("scored", None)
    assert oracle.rewards == {"reward": 1.0, "agent_saw_tests": 0.0}
    assert oracle.row()["reward_agent_saw_tests"] == 0.0
    assert "answer=42" in (tmp_path / "oracle" / "verifier" / "test-stdout.txt").read_text()
    noop = run_harbor_trial(tiny, "noop", tmp_path / "noop", sandbox_image)
    assert (noop.status, noop.reward, noop.image) == ("scored", 0.0, oracle.image)
    assert noop.build_s < 5  # the image of this digest was built once


def test_a_base_image_that_cannot_be_pulled_is_one_line_naming_the_option(tmp_path, sandbox_image):
    context = tmp_path / "env"
    context.mkdir()
    (context / "Dockerfile").write_text("FROM registry.invalid/reb-ray/none:1\n")
    with pytest.raises(BuildFailed) as err:
        ensure_image("gone", context, context / "Dockerfile", {}, tmp_path / "logs", 120, sandbox_image)
    text = str(err.value)
    assert err.value.category == "infra_sandbox" and "\n" not in text
    assert "registry.invalid/reb-ray/none:1 cannot be pulled here" in text and "--image-map" in text
    assert list((tmp_path / "logs").glob("build-gone-*.log"))


@pytest.mark.skipif(not HARBOR.exists(), reason="harbor is not installed (.venv-harbor; scripts/setup.sh)")
def test_harbor_run_reads_the_same_reward(tiny, tmp_path, slow_process):
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    run = subprocess.run([str(HARBOR), "run", "-p", str(tiny.task_dir), "-a", "oracle", "-e", "docker", "-n", "1",
                          "-o", str(tmp_path), "--job-name", "tiny", "-y", "-q"], capture_output=True, text=True,
                         env=env, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    [trial] = [p for p in (tmp_path / "tiny").iterdir() if p.is_dir()]
    assert json.loads((trial / "verifier" / "reward.json").read_text()) == {"reward": 1, "agent_saw_tests": 0}


@pytest.mark.skipif(not HARBOR.exists(), reason="harbor is not installed (.venv-harbor; scripts/setup.sh)")
def test_exported_task_toml_is_valid_for_harbor(tmp_path, slow_process):
    from reb_ray.harbor.export import export_task
    from reb_ray.suite.load import load_suite

    toolbox = tmp_path / "toolbox.tar"
    toolbox.write_bytes(b"")
    task = next(t for t in load_suite("demo") if t.id == "numpy-trainer")
    root = export_task(task, tmp_path / "out", "reb-ray/sandbox:x", toolbox).path
    code = ("import sys; from harbor.models.task.task import Task; t = Task(sys.argv[1]); "
            "print(t.config.verifier.timeout_sec, t.config.environment.gpus, t.paths.discovered_solve_path is not None)")
    run = subprocess.run([str(HARBOR.parent / "python"), "-c", code, str(root)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    expected = tomllib.loads((root / "task.toml").read_text())
    assert run.stdout.split() == [f"{expected['verifier']['timeout_sec']:.1f}", "0", "True"]
