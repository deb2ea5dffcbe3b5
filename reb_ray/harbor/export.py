"""Writing reb-ray tasks as Harbor tasks (`reb-ray tasks export --format harbor OUT`).

One reb-ray task becomes one Harbor task directory, `OUT/<task-id>/`:

    task.toml              [metadata] (suite, task, repository, commit), [agent] timeout_sec (the
                           sweep's default agent time limit), [verifier] timeout_sec (every
                           stage's timeout plus C0's and the audit's), [environment] cpus,
                           memory_mb, gpus (the most any applicable stage needs: C2/C3 one, C4
                           its ranks), build_timeout_sec
    instruction.md         the prompt every reb-ray agent gets (reb_ray.agents.prompt), verbatim
    environment/Dockerfile FROM the base image (an option: Harbor builds with the local Docker,
                           so it must be an image that Docker has or can pull; default the reb-ray
                           sandbox image, which carries the `/usr/bin/python3` the probes run
                           with); the repository at its pinned commit at /work/repo
    environment/repo/      the repository: the bundled source, or a checkout from a local
                           mirror; without a mirror the Dockerfile clones the commit itself
    tests/test.sh          runs tests/reb_ray_verify.py (reb_ray.harbor.verify_program):
                           reb-ray's probes against the report's interpreter, one metric per
                           stage plus `reward`, written to /logs/verifier/reward.json
    tests/spec.json        the hidden stage commands, success rules and C0 baseline
    tests/toolbox.tar      the probe toolbox (pyright, its node, probes/), hard-linked when the
                           cache is on the same file system
    tests/helpers/         the task's probe helpers ($REB_RAY_HELPERS)
    solution/solve.sh      the task's reference recipe (reference/Dockerfile) as a shell
                           script, with the recipe's files beside it; absent without a recipe

Harbor copies tests/ in only after the agent ran and solution/ only for its `oracle` agent,
so the agent never sees the stage commands or the probes, as in reb-ray.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from reb_ray.agents.base import REPORT_PATH
from reb_ray.agents.prompt import REPO_ROOT, render_prompt
from reb_ray.agents.reference import RECIPE_FILES, parse_dockerfile, parse_env, reference_dir
from reb_ray.errors import RebRayError
from reb_ray.models.task import HELPERS_DIR, TaskSpec

VERIFY_PROGRAM = Path(__file__).with_name("verify_program.py")
#: The agent's time limit a Harbor task gets: reb-ray's default (SweepConfig.agent_timeout_s), s.
AGENT_TIMEOUT_S = 1800.0
#: Seconds the verifier gets beyond the stages' own timeouts: C0 (pyright, 600 s at most), the
#: facts probe and unpacking the toolbox.
VERIFIER_OVERHEAD_S = 900.0
#: What a Harbor task gets when the spec says nothing: reb-ray's default sandbox (one CPU).
DEFAULT_CPUS = 1
DEFAULT_MEMORY_MB = 4096
_STAGES = (("c1", "cpu", 0), ("c3", "single_gpu", 1), ("c4", "multi_gpu", None))


class ExportError(RebRayError):
    """A task cannot be written as a Harbor task; the message names the task and why."""


@dataclass(frozen=True)
class Exported:
    """One written Harbor task: its directory, whether it has an oracle solution, GPUs asked."""

    task_id: str
    path: Path
    has_solution: bool
    gpus: int


def stage_spec(task: TaskSpec) -> dict:
    """The hidden part of the task the exported verifier reads (tests/spec.json): per applicable
    stage (c1, c2, c3, c4) its command, environment, workdir, timeout (s), success rule and GPUs."""
    stages: dict[str, dict] = {}
    for name, field, gpus in _STAGES:
        stage = getattr(task.stages, field)
        if name == "c3" and task.stages.cuda.applicable:
            stages["c2"] = {"gpus": 1}
        if not stage.applicable:
            continue
        stages[name] = {"command": stage.command, "env": dict(stage.env), "workdir": stage.workdir,
                        "timeout_s": stage.timeout_s, "exit_code": stage.success.exit_code,
                        "log_pattern": stage.success.log_pattern,
                        "gpus": stage.ranks if gpus is None else gpus}  # type: ignore[attr-defined]
    if "c2" not in stages and task.stages.cuda.applicable:
        stages["c2"] = {"gpus": 1}
    order = ["c1", "c2", "c3", "c4"]
    return {"task": task.id, "suite": task.suite, "repo_dir": REPO_ROOT, "report_path": REPORT_PATH,
            "c0_baseline_total": task.c0_baseline_total,
            "stages": {name: stages[name] for name in order if name in stages}}


def task_toml(task: TaskSpec, cpus: float, memory_mb: int) -> str:
    """The Harbor task.toml of `task` (schema 1.4: nested [agent], [verifier], [environment])."""
    timeouts = sum(getattr(task.stages, field).timeout_s for _, field, _ in _STAGES
                   if getattr(task.stages, field).applicable)
    meta = {"reb_ray_suite": task.suite, "reb_ray_task": task.id, "category": task.category,
            "repository": task.source.label}
    if task.source.commit:
        meta["commit"] = task.source.commit
    lines = ['schema_version = "1.4"', "", "[metadata]"]
    lines += [f"{key} = {json.dumps(value)}" for key, value in meta.items()]
    lines += ["", "[agent]", f"timeout_sec = {AGENT_TIMEOUT_S:g}",
              "", "[verifier]", f"timeout_sec = {timeouts + VERIFIER_OVERHEAD_S:g}",
              "", "[environment]", "build_timeout_sec = 1800", f"cpus = {cpus:g}", f"memory_mb = {memory_mb}",
              f"gpus = {task.gpus_needed}", ""]
    return "\n".join(lines)


def solve_script(task: TaskSpec, ca_bundle: Path | None = None) -> str | None:
    """The task's reference recipe as solution/solve.sh, or None when it has none.

    The recipe's Dockerfile is replayed as the `reference` agent replays it: `ENV` exported,
    `COPY` of a recipe file from /solution (the repository is already in place; `certs` holds
    `ca_bundle` as ca.pem when one is given, as reb-ray lends the node's CA bundle to a rebuild,
    else it and `wheels` become empty directories), `RUN` in the current `WORKDIR`, stopping at the first
    failure (`set -e`); then the stored report is written to the report path."""
    where = reference_dir(task)
    dockerfile = where / "Dockerfile"
    if not dockerfile.is_file():
        return None
    try:
        steps = parse_dockerfile(dockerfile.read_text())
    except ValueError as exc:
        raise ExportError(f"{task.suite}/{task.id}: reference recipe: {exc}") from None
    out = ["#!/bin/bash", f"# The reference recipe of reb-ray task {task.suite}/{task.id}, replayed as a script.",
           "set -euo pipefail", "export PIP_COMPILE=0", f"cd {shlex.quote(REPO_ROOT)}"]
    for word, args in steps:
        if word == "ENV":
            out += [f"export {key}={shlex.quote(value)}" for key, value in parse_env(args).items()]
        elif word == "WORKDIR":
            out.append(f"mkdir -p {shlex.quote(args)} && cd {shlex.quote(args)}")
        elif word == "RUN":
            out.append(args)
        elif word == "COPY":
            *sources, dest = shlex.split(args)
            into_dir = len(sources) > 1 or dest.endswith("/")
            for src in sources:
                if src == "repo":
                    continue
                if src == "certs" and ca_bundle is not None:
                    out.append(f"mkdir -p {shlex.quote(dest)} && cp /solution/certs/ca.pem {shlex.quote(dest)}/ca.pem")
                elif src in ("certs", "wheels") and not (where / src).exists():
                    out.append(f"mkdir -p {shlex.quote(dest)}")
                elif into_dir:
                    out.append(f"mkdir -p {shlex.quote(dest)} && cp -r /solution/{shlex.quote(src)} {shlex.quote(dest)}")
                else:
                    out.append(f"mkdir -p {shlex.quote(os.path.dirname(dest) or '/')} && "
                               f"cp -r /solution/{shlex.quote(src)} {shlex.quote(dest)}")
    if (where / "report.json").is_file():
        out += [f"mkdir -p {shlex.quote(os.path.dirname(REPORT_PATH))}",
                f"cp /solution/report.json {shlex.quote(REPORT_PATH)}"]
    return "\n".join(out) + "\n"


def dockerfile(base_image: str, clone: tuple[str, str] | None) -> str:
    """environment/Dockerfile: the base image and the repository at /work/repo (copied, or
    cloned at its commit when `clone` = (url, commit) is given)."""
    lines = [f"FROM {base_image}", "USER root"]
    if clone is None:
        lines.append(f"COPY repo {REPO_ROOT}")
    else:
        url, commit = clone
        lines.append(f"RUN git clone -q --no-checkout {shlex.quote(url)} {REPO_ROOT} && "
                     f"git -C {REPO_ROOT} checkout -q --detach {commit}")
    lines.append(f"WORKDIR {REPO_ROOT}")
    return "\n".join(lines) + "\n"


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _place_repo(task: TaskSpec, dest: Path, mirrors: list[Path]) -> tuple[str, str] | None:
    """Put the task's repository at `dest` (bundled source, or a mirror's checkout of the commit);
    returns (url, commit) to clone in the Dockerfile instead when no mirror has it."""
    from reb_ray.suite.placement import bundled_checkout, find_mirror

    if task.source.kind == "bundled":
        src, _commit = bundled_checkout(task)
        shutil.copytree(src, dest, symlinks=True)
        return None
    mirror = find_mirror(mirrors, task.source.owner_repo) if task.source.owner_repo else None
    if mirror is None:
        return task.source.git, task.source.commit  # type: ignore[return-value]
    try:
        subprocess.run(["git", "clone", "-q", "--no-checkout", str(mirror), str(dest)], check=True, capture_output=True)
        subprocess.run(["git", "checkout", "-q", "--detach", task.source.commit], cwd=dest, check=True, capture_output=True)
    except subprocess.CalledProcessError as exc:
        raise ExportError(f"{task.suite}/{task.id}: cannot check out {task.source.commit} from {mirror}: "
                          f"{exc.stderr.decode(errors='replace').strip()[-200:]}") from None
    return None


def export_task(task: TaskSpec, out: Path, base_image: str, toolbox_tar: Path, mirrors: list[Path] | None = None,
                cpus: float = DEFAULT_CPUS, memory_mb: int = DEFAULT_MEMORY_MB,
                ca_bundle: Path | None = None) -> Exported:
    """Write `task` as the Harbor task `out/<task id>` (module docstring), replacing an earlier
    export there; a failure removes the half-written directory. `ca_bundle`: the CA bundle the
    solution's package installs trust (a TLS-intercepting proxy's), shipped in solution/certs."""
    dest = out / task.id
    if dest.exists():
        shutil.rmtree(dest)
    try:
        (dest / "environment").mkdir(parents=True)
        (dest / "tests").mkdir()
        clone = _place_repo(task, dest / "environment" / "repo", mirrors or [])
        (dest / "environment" / "Dockerfile").write_text(dockerfile(base_image, clone))
        (dest / "task.toml").write_text(task_toml(task, cpus, memory_mb))
        (dest / "instruction.md").write_text(render_prompt(task, REPORT_PATH).text)
        (dest / "tests" / "spec.json").write_text(json.dumps(stage_spec(task), indent=2) + "\n")
        shutil.copyfile(VERIFY_PROGRAM, dest / "tests" / "reb_ray_verify.py")
        test_sh = dest / "tests" / "test.sh"
        test_sh.write_text("#!/bin/sh\n# reb-ray's hidden probes; the reward goes to /logs/verifier/reward.json.\n"
                           'py=/usr/bin/python3; [ -x "$py" ] || py="$(sed -n \'s/.*"python_path": *"\\([^"]*\\)".*/\\1/p\' '
                           f'{REPORT_PATH} | head -n 1)"\nexec "$py" /tests/reb_ray_verify.py\n')
        test_sh.chmod(0o755)
        _link_or_copy(toolbox_tar, dest / "tests" / "toolbox.tar")
        helpers = task.task_dir / HELPERS_DIR
        if helpers.is_dir():
            shutil.copytree(helpers, dest / "tests" / "helpers")
        script = solve_script(task, ca_bundle)
        if script is not None:
            (dest / "solution").mkdir()
            where = reference_dir(task)
            for name in RECIPE_FILES:
                if (where / name).is_file():
                    shutil.copyfile(where / name, dest / "solution" / name)
            if ca_bundle is not None:
                (dest / "solution" / "certs").mkdir()
                shutil.copyfile(ca_bundle, dest / "solution" / "certs" / "ca.pem")
            (dest / "solution" / "solve.sh").write_text(script)
            (dest / "solution" / "solve.sh").chmod(0o755)
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    return Exported(task.id, dest, script is not None, task.gpus_needed)
