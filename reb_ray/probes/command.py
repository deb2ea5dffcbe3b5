"""Running a task's stage command in the sandbox with the reported interpreter first on PATH."""

from __future__ import annotations

import posixpath

from reb_ray.models.task import StageSpec
from reb_ray.sandbox import ExecResult, Sandbox

SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def stage_env(stage: StageSpec, python_path: str, visible_gpus: str) -> dict[str, str]:
    """The stage's environment: the report interpreter's bin dir first on PATH, GPUs limited
    to `visible_gpus` ("" hides them all: C1 must really run without GPUs, field case F08),
    then the task's own variables."""
    env = {
        "PATH": f"{posixpath.dirname(python_path)}:{SYSTEM_PATH}",
        "CUDA_VISIBLE_DEVICES": visible_gpus,
        "PYTHONUNBUFFERED": "1",
        "HOME": "/root",
    }
    env.update(stage.env)
    return env


def run_stage_command(sandbox: Sandbox, stage: StageSpec, repo_dir: str, python_path: str, visible_gpus: str = "") -> ExecResult:
    """Run `stage.command` in `repo_dir/stage.workdir` with its timeout (seconds)."""
    workdir = posixpath.normpath(posixpath.join(repo_dir, stage.workdir))
    return sandbox.exec(stage.command, timeout=stage.timeout_s, env=stage_env(stage, python_path, visible_gpus), workdir=workdir)
