"""C0 baseline: distinct third-party top-level imports of a repository's tracked Python files,
on a small repository made with real git (expected sets written by hand)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from reb_ray.suite.c0_baseline import baseline_for_commit, scan, scan_imports

FILES = {
    # root module: stdlib, third-party (also dotted and aliased), the local package, src/ package,
    # a root module, an import inside a function and one guarded by try/except
    "train.py": """\
import os, sys
import json as j
import numpy as np
import torch.nn as nn
from mylib.core import helper
from srcpkg import thing
import helpers

def load():
    import yaml
    return yaml

try:
    import ujson
except ImportError:
    ujson = None
""",
    "setup.py": "from setuptools import setup\nsetup()\n",
    "helpers.py": "from .mylib import core\nimport requests\n",
    "mylib/__init__.py": "from .core import helper\nfrom . import core\n",
    "mylib/core.py": "from __future__ import annotations\nfrom typing import Any\nimport scipy.sparse\n\ndef helper(): ...\n",
    "src/srcpkg/__init__.py": "import pandas as pd\nthing = 1\n",
    # a package deep in the tree (found by its __init__.py) and modules next to the importing file
    "vendor/x/deeplib/__init__.py": "",
    "tools/deep/run.py": "import deeplib\nimport localsib\nimport nestedpkg.sub\nfrom importlib import metadata\n"
                         "import matplotlib.pyplot as plt\n",
    "tools/deep/localsib.py": "",
    "tools/deep/nestedpkg/sub.py": "",
    "broken.py": "def oops(:\n    import should_not_count_broken\n",
    "notes.txt": "import not_python\n",
}
THIRD_PARTY = {"numpy", "torch", "yaml", "ujson", "setuptools", "requests", "scipy", "pandas", "matplotlib"}
STDLIB_USED = {"os", "sys", "json", "__future__", "typing", "importlib"}
LOCAL_USED = {"mylib", "srcpkg", "helpers", "deeplib", "localsib", "nestedpkg"}


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=cwd,
                          check=True, capture_output=True, text=True).stdout.strip()


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def commit_files(root: Path, files: dict[str, str], message: str) -> str:
    """Write `files` into the git repository `root` (created if needed), commit them, return the sha."""
    if not (root / ".git").exists():
        root.mkdir(parents=True, exist_ok=True)
        git("init", "-q", cwd=root)
    write(root, files)
    git("add", "-A", cwd=root)
    git("commit", "-q", "-m", message, cwd=root)
    return git("rev-parse", "HEAD", cwd=root)


@pytest.fixture
def repo(tmp_path) -> Path:
    root = tmp_path / "repo"
    commit_files(root, FILES, "first")
    write(root, {"untracked.py": "import should_not_count_untracked\n"})  # never added
    return root


def test_tracked_files_third_party_top_level_only(repo):
    assert scan_imports(repo) == THIRD_PARTY


def test_syntax_errors_are_skipped_and_counted(repo):
    result = scan(repo)
    assert result.syntax_errors == 1
    assert result.files == 11  # tracked *.py only: notes.txt and untracked.py are not read
    assert "should_not_count_broken" not in result.modules


def test_paper_rule_keeps_stdlib_and_local_names(repo):
    assert scan(repo, include_stdlib=True).modules == THIRD_PARTY | STDLIB_USED
    assert scan(repo, include_local=True).modules == THIRD_PARTY | LOCAL_USED
    assert scan(repo, include_stdlib=True, include_local=True).modules == THIRD_PARTY | STDLIB_USED | LOCAL_USED


F04_FILES = {
    "tools/train.py": "import os, sys\n"
                      "sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'third_party', 'stylegan'))\n"
                      "import dnnlib\nimport numpy\n",
    "third_party/stylegan/dnnlib/__init__.py": "from .util import EasyDict\n",
    "third_party/stylegan/dnnlib/util.py": "class EasyDict(dict): ...\n",
}


def test_f04_imports_only_a_sys_path_edit_resolves_are_known(tmp_path):
    """Field case F04: `dnnlib` lives in third_party/stylegan, put on sys.path at run time. The
    paper's rule counts it in the total; the scan says it cannot resolve statically."""
    write(tmp_path, F04_FILES)
    found = scan(tmp_path, include_stdlib=True, include_local=True)
    assert found.modules == {"os", "sys", "dnnlib", "numpy"} and found.runtime_path == {"dnnlib"}
    assert scan(tmp_path).modules == {"numpy"}  # third-party only: dnnlib is the repository's own


def test_runtime_path_names_exclude_root_sibling_and_subpackage_modules(repo):
    # deeplib sits in vendor/x (only a path edit reaches it); localsib/nestedpkg sit next to the
    # importing file and mylib/srcpkg at the root and in src/: those resolve statically
    assert scan(repo).runtime_path == set()  # no sys.path edit anywhere: a nested folder is just a folder
    write(repo, {"tools/deep/paths.py": "import sys\nsys.path.append('vendor/x')\n",
                 "mylib/torch/__init__.py": "", "tools/deep/uses_torch.py": "import torch\n"})
    git("add", "-A", cwd=repo)
    # mylib/torch is a subpackage (mylib has __init__.py): `import torch` never means it
    assert scan(repo).runtime_path == {"deeplib"}


def test_plain_directory_is_walked(repo, tmp_path):
    copy = tmp_path / "plain"
    shutil.copytree(repo, copy, ignore=shutil.ignore_patterns(".git"))
    (copy / "venv").mkdir()
    (copy / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    write(copy, {"venv/lib/site.py": "import should_not_count_venv\n"})
    assert scan_imports(copy) == THIRD_PARTY | {"should_not_count_untracked"}


def test_baseline_for_commit_reads_a_bare_mirror_at_the_pinned_commit(repo, tmp_path):
    first = git("rev-parse", "HEAD", cwd=repo)
    write(repo, {"later.py": "import later_dep\n"})
    git("add", "later.py", cwd=repo)
    git("commit", "-q", "-m", "second", cwd=repo)
    second = git("rev-parse", "HEAD", cwd=repo)
    mirror = tmp_path / "mirror.git"
    git("clone", "-q", "--mirror", str(repo), str(mirror), cwd=tmp_path)
    before = sorted(p.relative_to(mirror) for p in mirror.rglob("*"))

    strict = dict(include_stdlib=False, include_local=False)
    assert baseline_for_commit(mirror, first, **strict) == {"total": 9, "modules": sorted(THIRD_PARTY), "syntax_errors": 1,
                                                            "runtime_path": []}
    assert baseline_for_commit(mirror, second, **strict)["modules"] == sorted(THIRD_PARTY | {"later_dep"})
    assert baseline_for_commit(mirror, first)["total"] == 21  # the paper's rule: every distinct top-level import
    assert sorted(p.relative_to(mirror) for p in mirror.rglob("*")) == before  # the mirror is only read


def test_baseline_for_commit_unknown_commit_raises(repo):
    with pytest.raises(RuntimeError, match="checkout failed"):
        baseline_for_commit(repo, "0" * 40)
