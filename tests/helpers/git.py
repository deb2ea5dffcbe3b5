"""Git for the tests: a fixed identity and PATH, so commits work on a machine with no git config."""

from __future__ import annotations

import subprocess
from pathlib import Path

#: The environment a test's git runs under: a committer identity and nothing of the host's.
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": "/usr/bin:/bin"}


def git(*args: str, cwd: Path) -> str:
    """`git ARGS` in `cwd`; its stripped stdout. Raises CalledProcessError on failure."""
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=GIT_ENV).stdout.strip()


def mirrored_repo(tmp_path: Path, *versions: dict[str, str], repo: str = "someone/tiny") -> tuple[Path, list[str]]:
    """A repository with one commit per version (path: text, written over the one before) in
    tmp_path/work, and its bare clone at tmp_path/mirrors/OWNER/NAME.git, the layout a repository
    mirror has (--repo-mirror). Returns (tmp_path/mirrors, the commits' shas in order)."""
    work = tmp_path / "work"
    work.mkdir()
    git("init", "-q", "-b", "main", cwd=work)
    commits = []
    for n, files in enumerate(versions):
        for name, text in files.items():
            (work / name).parent.mkdir(parents=True, exist_ok=True)
            (work / name).write_text(text)
        git("add", "-A", cwd=work)
        git("commit", "-q", "-m", f"version {n}", cwd=work)
        commits.append(git("rev-parse", "HEAD", cwd=work))
    mirrors = tmp_path / "mirrors"
    owner, name = repo.split("/")
    (mirrors / owner).mkdir(parents=True)
    git("clone", "-q", "--bare", str(work), str(mirrors / owner / f"{name}.git"), cwd=tmp_path)
    return mirrors, commits
