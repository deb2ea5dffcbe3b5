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
