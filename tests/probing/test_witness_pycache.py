"""A command stage starts with no byte-code cache in the repository.

An interpreter that finds a valid `__pycache__/<module>.cpython-311.pyc` runs it without opening
the module's source, so the kernel's trace of the stage shows no pinned repository file opened and
an honest run whose entry is a task helper that imports the repository (kyegomez--visionmamba's
C1) would be `unverified_run` whenever the agent ran the code in its phase, or an earlier stage
did (C1 before C3 on a GPU node); and the code that ran would be the cache's, not the pinned
file's. The witness's arming step removes the caches; the trace here is the real one of the
node's strace.
"""

from __future__ import annotations

import py_compile
import shutil
import subprocess
import sys

import pytest

from reb_ray.probing.witness import _ARM

STRACE = shutil.which("strace")


def _repo(tmp_path):
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "__init__.py").write_text("VALUE = 1\n")
    py_compile.compile(str(repo / "pkg" / "__init__.py"), doraise=True)  # what a run in the agent's phase leaves
    (repo / "keep.txt").write_text("data\n")
    return repo


def _opened(repo) -> str:
    proc = subprocess.run([STRACE, "-f", "-y", "-e", "trace=openat", sys.executable, "-c", "import pkg"], cwd=repo,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stderr


@pytest.mark.usefixtures("slow_process")
@pytest.mark.skipif(STRACE is None, reason="this machine has no strace")
def test_arming_removes_the_repositorys_byte_code_so_the_trace_shows_the_source(tmp_path):
    repo = _repo(tmp_path)
    source = str(repo / "pkg" / "__init__.py")
    assert f"<{source}>" not in _opened(repo)  # the control: with the cache, the source is never opened
    py_compile.compile(source, doraise=True)
    res = subprocess.run(["sh", "-c", _ARM, "arm", str(tmp_path / "out"), "/bin/false", "", "", str(repo)],
                         capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin", "QT": "5", "QUERY": ""})
    assert res.returncode == 0, res.stderr
    assert not (repo / "pkg" / "__pycache__").exists() and (repo / "keep.txt").read_text() == "data\n"
    assert (repo / "pkg" / "__init__.py").read_text() == "VALUE = 1\n"
    assert f"<{source}>" in _opened(repo)
