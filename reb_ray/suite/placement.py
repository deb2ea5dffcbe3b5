"""Placing a task's repository at its pinned commit, on the host, before it enters a sandbox.

Sources: bundled source (committed into a git repository with a fixed author and date, so
the same files always give the same commit; once per node and content, then reused), a local
mirror directory (`--repo-mirror DIR`, looked up by owner/name), or a clone of the task's git
URL. The checked-out commit is verified,
and so is the whole checkout: every tracked file present (none deleted in `git status`). A
mirror that lacks blobs makes `git checkout` print `unable to read sha1 file` and still exit 0,
leaving those files out; that is caught here, not charged to the agent
later as `repo_modified`. Any failure here is an infrastructure failure
(`infra_clone`), never the agent's.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from reb_ray.errors import InfraError
from reb_ray.models.task import TaskSpec

_FIXED_IDENTITY = {
    "GIT_AUTHOR_NAME": "reb-ray", "GIT_AUTHOR_EMAIL": "reb-ray@localhost",
    "GIT_COMMITTER_NAME": "reb-ray", "GIT_COMMITTER_EMAIL": "reb-ray@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z",
}


@dataclass(frozen=True)
class PlacedRepo:
    """A checkout on the host: its directory, the verified commit, and where it came from."""

    path: Path
    commit: str
    origin: str


def _run_git(*args: str, cwd: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, **_FIXED_IDENTITY, "GIT_TERMINAL_PROMPT": "0"}
    proc = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise InfraError("infra_clone", f"git {args[0]} failed: {last[0][:200]}")
    return proc


def _git(*args: str, cwd: Path | None = None, timeout: float = 600) -> str:
    return _run_git(*args, cwd=cwd, timeout=timeout).stdout.strip()


def verify_checkout(dest: Path, commit: str, origin: str, checkout_stderr: str = "") -> None:
    """Every tracked file of `commit` is present in `dest` (none deleted in `git status`), and
    `git checkout` reported no unreadable object.

    Files present but shown as modified are left alone: right after a checkout only attribute
    rules (line-ending normalisation, filters) produce those, the repository is as committed,
    and the trial's baseline (`tracked_state`) keeps them from being charged to the agent.
    Raises InfraError("infra_clone", ...) naming the first missing file and git's own error
    line (e.g. `unable to read sha1 file of F (SHA)`).
    """
    status = _run_git("status", "--porcelain", "--untracked-files=no", "--no-renames", cwd=dest).stdout
    missing = [line[3:] for line in status.splitlines() if len(line) > 3 and "D" in line[:2]]
    said = next((ln.strip() for ln in checkout_stderr.splitlines() if "unable to read" in ln or "invalid object" in ln), "")
    if not missing and not said:
        return
    first = f"{len(missing)} tracked file(s) missing, first {missing[0]!r}" if missing else "objects unreadable"
    raise InfraError("infra_clone", f"checkout of {commit[:12]} from {origin} is incomplete: {first}"
                                    + (f"; git said: {said[:200]}" if said else "")
                                    + f"; the repository lacks objects: delete {origin} and re-create it with `reb-ray mirror`")


def _git_dir_in(path: Path) -> Path | None:
    """`path` if it is a repository (bare or not), else its one child that is (the fetch tool's
    `owner+name/repo` layout), else None."""
    if (path / "HEAD").is_file() or (path / ".git").exists():
        return path
    nested = [child for child in sorted(path.iterdir()) if (child / "HEAD").is_file()]
    return nested[0] if nested else None


def find_mirror(mirror_dirs: list[Path], owner_repo: str) -> Path | None:
    """The mirror of `owner/name` in any of `mirror_dirs`: DIR/owner/name(.git) or DIR/owner+name(.git)."""
    owner, name = owner_repo.split("/", 1)
    for base in mirror_dirs:
        for candidate in (base / owner / f"{name}.git", base / owner / name, base / f"{owner}+{name}", base / f"{owner}+{name}.git"):
            if candidate.is_dir() and (found := _git_dir_in(candidate)) is not None:
                return found
    return None


#: Cached bundled checkouts not used for this long are removed when a new one is built.
BUNDLED_KEEP_S = 7 * 24 * 3600
_touched: dict[Path, float] = {}  # cache entry -> when this process last marked it used (monotonic)


def _tree_key(root: Path) -> str:
    """A hash of every entry under `root`: relative path, mode, link target and file contents, so
    any edit gives a new key and the same files (a test's fresh copy) the same one."""
    digest = hashlib.sha256()
    for dirpath, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(dirs + files):
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            digest.update(f"{os.path.relpath(path, root)}\0{st.st_mode}\0".encode())
            if os.path.islink(path):
                digest.update(os.readlink(path).encode())
            elif os.path.isfile(path):
                with open(path, "rb") as f:
                    digest.update(hashlib.sha256(f.read()).digest())
    return digest.hexdigest()


def bundled_checkout(task: TaskSpec) -> tuple[Path, str]:
    """The task's bundled source committed into a git repository once per node and content, then
    reused by every trial, so no trial pays a `git commit` of the tree: (its directory, the commit). Callers copy it into
    their sandbox and never write it.

    Cached under `<reb-ray cache>/bundled/<suite>--<task>--<hash of the tree>/`, built in a
    temporary directory and renamed into place, so concurrent workers never see half of one;
    entries unused for BUNDLED_KEEP_S are removed when a new one is built. Raises
    InfraError("infra_clone") when git fails, OSError for the file system.
    """
    from reb_ray.probing.toolbox import cache_root

    final = cache_root() / "bundled" / f"{task.suite}--{task.id}--{_tree_key(task.repo_path)[:16]}"
    if not (final / "commit").is_file():
        final.parent.mkdir(parents=True, exist_ok=True)
        _prune(final.parent)
        tmp = final.parent / f".tmp-{final.name}-{uuid.uuid4().hex[:8]}"
        try:
            repo = tmp / "repo"
            shutil.copytree(task.repo_path, repo, symlinks=True)
            _git("init", "-q", "-b", "main", cwd=repo)
            _git("add", "-A", cwd=repo)
            _git("commit", "-q", "--allow-empty", "-m", f"{task.suite}/{task.id} bundled source", cwd=repo)
            (tmp / "commit").write_text(_git("rev-parse", "HEAD", cwd=repo))
            try:
                os.rename(tmp, final)
            except OSError:
                if not (final / "commit").is_file():  # not another worker's finished copy: a real failure
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    if time.monotonic() - _touched.get(final, -BUNDLED_KEEP_S) > 3600:  # marked used (hourly), so pruning keeps it
        os.utime(final)
        _touched[final] = time.monotonic()
    return final / "repo", (final / "commit").read_text().strip()


def _prune(cache: Path) -> None:
    """Remove cached checkouts (and stale temporary ones) unused for BUNDLED_KEEP_S."""
    for entry in cache.iterdir():
        try:
            if time.time() - entry.stat().st_mtime > BUNDLED_KEEP_S:
                shutil.rmtree(entry, ignore_errors=True)
        except OSError:
            continue


def place_repo(task: TaskSpec, workspace: Path, mirror_dirs: list[Path] | None = None) -> PlacedRepo:
    """Check the task's repository out under `workspace/repo` and verify the commit; bundled
    source is the node's committed copy instead (`bundled_checkout`: read it, never write it).

    Raises InfraError("infra_clone", ...) on any failure (missing mirror commit included).
    """
    dest = workspace / "repo"
    if dest.exists():
        shutil.rmtree(dest)
    source = task.source
    try:
        if source.kind == "bundled":
            path, commit = bundled_checkout(task)
            return PlacedRepo(path, commit, f"bundled:{task.suite}/{task.id}")
        mirror = find_mirror(mirror_dirs or [], source.owner_repo) if source.owner_repo else None
        origin = str(mirror) if mirror else source.git
        _git("clone", "-q", "--no-checkout", origin, str(dest))
        try:
            checkout = _run_git("checkout", "-q", "--detach", source.commit, cwd=dest)
        except InfraError:
            raise InfraError("infra_clone", f"commit {source.commit} of {source.owner_repo} not found in {origin}") from None
        commit = _git("rev-parse", "HEAD", cwd=dest)
        if commit.lower() != source.commit.lower():
            raise InfraError("infra_clone", f"checked out {commit}, expected {source.commit}")
        verify_checkout(dest, commit, origin, checkout.stderr)
        return PlacedRepo(dest, commit, f"mirror:{mirror}" if mirror else f"git:{source.git}")
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InfraError("infra_clone", f"placing {task.id}: {exc}") from None
