"""Local bare mirrors of a suite's repositories, for nodes without access to the forge.

`update_mirrors(tasks, dir)` clones each git task's repository as `DIR/owner/name.git`
(`git clone --mirror`) or updates an existing mirror (`git remote update --prune`), then checks
that the pinned commit is present. Sweeps use the mirrors with `--repo-mirror DIR`.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from reb_ray.models.task import TaskSpec


@dataclass
class MirrorResult:
    """One repository: `state` is cloned / updated / failed; `has_commit` whether the pin is there."""

    repo: str
    path: Path
    state: str
    has_commit: bool
    detail: str = ""


def _git(args: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=3600,
                          env={"GIT_TERMINAL_PROMPT": "0", **_passthrough()})


def _passthrough() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k.startswith(("GIT_", "HOME", "PATH", "SSL_", "HTTP", "HTTPS", "NO_PROXY"))}


def update_mirror(task: TaskSpec, root: Path) -> MirrorResult:
    """Clone or update the mirror of `task`'s repository under `root`. Never raises for git errors."""
    owner_repo = task.source.owner_repo
    path = root / f"{owner_repo}.git"
    if path.is_dir():
        proc, state = _git(["remote", "update", "--prune"], cwd=path), "updated"
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        proc, state = _git(["clone", "--quiet", "--mirror", task.source.git, str(path)]), "cloned"
    if proc.returncode != 0:
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return MirrorResult(owner_repo, path, "failed", False, last[0][:200])
    has = _git(["cat-file", "-e", f"{task.source.commit}^{{commit}}"], cwd=path).returncode == 0
    detail = "" if has else f"pinned commit {task.source.commit} is not in the mirror"
    return MirrorResult(owner_repo, path, state, has, detail)


def update_mirrors(tasks: list[TaskSpec], root: Path, progress=None) -> list[MirrorResult]:
    """Mirror every distinct git repository of `tasks` (bundled tasks need none);
    `progress(line)` is told before each repository is fetched (a clone takes minutes)."""
    firsts: dict[str, TaskSpec] = {}
    for task in tasks:
        if task.source.kind == "git":
            firsts.setdefault(task.source.owner_repo, task)
    results = []
    for n, (repo, task) in enumerate(firsts.items(), start=1):
        if progress is not None:
            progress(f"mirroring {repo} ({n} of {len(firsts)})")
        results.append(update_mirror(task, root))
    return results
