"""Running a task's stage command in the sandbox with the reported interpreter as `python`."""

from __future__ import annotations

import posixpath
import shlex
from typing import Callable

from reb_ray.models.task import StageSpec
from reb_ray.probing.side_logs import clear_side_logs
from reb_ray.sandbox import ExecResult, Sandbox
from reb_ray.sandbox.output import OutputSink
from reb_ray.sandbox.base import SYSTEM_PATH, to_argv


def install_python_shim(sandbox: Sandbox, shim_dir: str, python_path: str) -> None:
    """Make `python` and `python3` in `shim_dir` run the report's interpreter.

    Wrapper scripts, not symlinks: a venv's interpreter finds its pyvenv.cfg next to the path
    it was started from, so a symlink elsewhere would silently drop the venv.
    """
    body = f'#!/bin/sh\nexec {shlex.quote(python_path)} "$@"\n'
    script = 'mkdir -p "$1" && for n in python python3; do printf "%s" "$2" > "$1/$n" && chmod 755 "$1/$n"; done'
    sandbox.exec(["sh", "-c", script, "shim", shim_dir, body], timeout=60)


def stage_env(stage: StageSpec, python_path: str, shim_dir: str, visible_gpus: str) -> dict[str, str]:
    """The stage's environment: the shim and the interpreter's bin dir first on PATH, GPUs
    limited to `visible_gpus` ("" hides them all: C1 must really run without GPUs, or a
    CPU entrypoint that needs a GPU would pass it), then the task's own variables."""
    env = {
        "PATH": f"{shim_dir}:{posixpath.dirname(python_path)}:{SYSTEM_PATH}",
        "CUDA_VISIBLE_DEVICES": visible_gpus,
        "PYTHONUNBUFFERED": "1",
        "HOME": "/root",
    }
    env.update(stage.env)
    return env


def stage_workdir(stage: StageSpec, repo_dir: str) -> str:
    """The sandbox directory `stage` runs in (and its relative side logs are relative to)."""
    return posixpath.normpath(posixpath.join(repo_dir, stage.workdir))


def run_stage_command(sandbox: Sandbox, stage: StageSpec, repo_dir: str, python_path: str, shim_dir: str,
                      visible_gpus: str = "", sink: OutputSink | None = None,
                      wrap: Callable[[list[str]], list[str]] | None = None) -> ExecResult:
    """Run `stage.command` in `repo_dir/stage.workdir` with its timeout (seconds).

    The success rule's log pattern is searched in the whole output as it streams (the
    result's `pattern_matches`), `sink` gets every output byte (the full-log artifact), and
    the stage's side logs are removed first so that those collected after it are its own.
    `wrap`: the command's argv runs under what it returns (the stage's observer).
    """
    install_python_shim(sandbox, shim_dir, python_path)
    workdir = stage_workdir(stage, repo_dir)
    clear_side_logs(sandbox, stage.side_logs, workdir)
    env = stage_env(stage, python_path, shim_dir, visible_gpus)
    watch = [stage.success.log_pattern] if stage.success.log_pattern is not None else []
    command = wrap(to_argv(stage.command)) if wrap is not None else stage.command
    return sandbox.exec(command, timeout=stage.timeout_s, env=env, workdir=workdir, watch=watch, sink=sink)
