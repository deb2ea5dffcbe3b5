"""C0 end to end: the real toolbox (node + pinned pyright) in real Docker sandboxes, networking off.

No mocks: environments are made in the sandbox with `python3 -m venv` and packages written into
site-packages by hand, or installed with pip from local source (`--no-index`).

The tests share one sandbox (a container's start and removal cost more than most of them), put
back before each test to what it was when it started (tests/probing/conftest.py: `put_back`):
what a test adds under the repository, /opt (environments, the toolbox), /tmp or root's home is
removed, and a test that changed what was there fails the next one's set-up.
"""

from __future__ import annotations

import json
import time

import pytest

from reb_ray.grading.c0 import grade_c0
from reb_ray.probing.c0 import run_c0
from reb_ray.probing.toolbox import TOOLBOX_SANDBOX_PATH, install_toolbox
from reb_ray.sandbox import SandboxConfig, open_sandbox
from tests.probing.conftest import put_back

pytestmark = pytest.mark.docker

REPO = "/work/repo"
VENV = "/opt/envs/research"
VENV_PY = f"{VENV}/bin/python"
SITE = f"{VENV}/lib/python3.11/site-packages"


def sh(sb, cmd: str, timeout: float = 120) -> str:
    res = sb.exec(["bash", "-c", cmd], timeout=timeout)
    assert res.ok, f"{cmd!r} -> {res.exit_code}: {res.output[-2000:]}"
    return res.output


def write_files(sb, root: str, files: dict[str, str]) -> None:
    for rel, text in files.items():
        sb.write_bytes(f"{root}/{rel}", text.encode())


def fake_packages(sb, site: str, names: list[str]) -> None:
    write_files(sb, site, {f"{name}/__init__.py": f"__version__ = '1.0'\n" for name in names})


def make_venv(sb, path: str = VENV, packages: list[str] = ()) -> str:
    sh(sb, f"python3 -m venv --without-pip {path}")
    fake_packages(sb, f"{path}/lib/python3.11/site-packages", list(packages))
    return f"{path}/bin/python"


def probe(sb, python: str, baseline: int | None = 10) -> tuple[dict | None, dict]:
    toolbox = install_toolbox(sb)
    raw = run_c0(sb, toolbox, REPO, python, timeout_s=300)
    return raw, grade_c0(raw, baseline)


def repo_state(sb) -> str:
    return sh(sb, f"cd {REPO} && find . -printf '%p %s %T@\\n' | sort")


def test_install_toolbox_is_fast_complete_and_replaces_leftovers(sandbox):
    # An agent left something at the toolbox path: it must not survive the install.
    sh(sandbox, f"mkdir -p {TOOLBOX_SANDBOX_PATH}/pyright && echo evil > {TOOLBOX_SANDBOX_PATH}/pyright/index.js")
    t = time.monotonic()
    path = install_toolbox(sandbox)
    elapsed = time.monotonic() - t
    assert path == TOOLBOX_SANDBOX_PATH
    assert sh(sandbox, f"{path}/node --version").strip().startswith("v")
    assert "evil" not in sh(sandbox, f"head -c 200 {path}/pyright/index.js")
    manifest = json.loads(sh(sandbox, f"cat {path}/MANIFEST.json"))
    assert manifest["pyright_version"] == "1.1.414"
    sh(sandbox, f"test -f {path}/probes/c0_probe.py && test -f {path}/pyright/dist/typeshed-fallback/stdlib/os/__init__.pyi")
    version = sh(sandbox, f"cd /tmp && {path}/node {path}/pyright/index.js --version")
    assert "1.1.414" in version
    print(f"install_toolbox: {elapsed:.2f} s")
    assert elapsed < 10, f"install_toolbox took {elapsed:.1f} s"


def test_f03_venv_interpreter_and_f06_offline(sandbox):
    """Packages only in /opt/envs/research; the shell's python3 lacks them. Networking is off."""
    assert sandbox.config.network == "none"
    make_venv(sandbox, packages=["requests", "numpy"])
    write_files(sandbox, REPO, {
        "main.py": "import requests\nimport numpy as np\nimport definitely_missing_mod\nfrom mypkg import util\n",
        "mypkg/__init__.py": "",
        "mypkg/util.py": "from . import helpers\nfrom .helpers import x\n",
        "mypkg/helpers.py": "x = 1\n",
        # agent-made environments inside the repository are never analysed
        ".venv/lib/python3.11/site-packages/hidden_junk/__init__.py": "import junk_dependency_a\n",
        "venv/pyvenv.cfg": "home = /usr/bin\n",
        "venv/lib/python3.11/site-packages/junk/__init__.py": "import junk_dependency_b\n",
        "node_modules/x/y.py": "import junk_dependency_c\n",
    })
    before = repo_state(sandbox)
    raw, g = probe(sandbox, VENV_PY, baseline=4)
    assert raw is not None and raw["python_ok"], raw
    assert g["c0_status"] == "failure", g
    assert g["c0_missing"] == 1 and g["c0_missing_modules"] == ["definitely_missing_mod"]
    assert g["c0_total"] == 4 and g["pyright_version"] == "1.1.414" and g["failure_category"] is None
    assert SITE in raw["interpreter_site_packages"] and SITE in raw["search_paths_real"]
    assert "venv" in raw["excluded_dirs"]
    assert repo_state(sandbox) == before, "the probe modified the repository"
    # The same repository against the shell's python3: numpy missing, requests has only stubs.
    raw2, g2 = probe(sandbox, "/usr/bin/python3")
    assert g2["c0_missing_modules"] == ["definitely_missing_mod", "numpy"]
    assert g2["c0_missing_source_modules"] == ["requests"]
    print(f"C0 probe: {raw['duration_s']:.2f} s in sandbox, pyright {raw['pyright_duration_s']:.2f} s")


def test_f03_pyright_missing_the_env_is_not_run(sandbox):
    """An interpreter whose search-path query fails for pyright only: C0 must not count 'everything
    missing' but say the probe is misconfigured."""
    make_venv(sandbox, packages=["numpy"])
    wrapper = "/opt/envs/wrapped-python"
    write_files(sandbox, "/opt/envs", {"wrapped-python": (
        '#!/bin/sh\ncase "$*" in *orig_sys_path*) exec /usr/bin/python3 -S "$@";; esac\n'
        f'exec {VENV_PY} "$@"\n')})
    sh(sandbox, f"chmod +x {wrapper}")
    write_files(sandbox, REPO, {"main.py": "import numpy\n"})
    raw, g = probe(sandbox, wrapper)
    assert raw is not None and raw["python_ok"]
    assert g["c0_status"] == "not_run" and g["failure_category"] == "infra_probe_misconfigured", g
    assert g["c0_missing"] is None


def test_f06_broken_toolbox_is_not_run_infra_never_zero(sandbox):
    make_venv(sandbox, packages=["numpy"])
    write_files(sandbox, REPO, {"main.py": "import numpy\nimport missing_one\n"})
    toolbox = install_toolbox(sandbox)
    sh(sandbox, f"rm {toolbox}/node")
    raw = run_c0(sandbox, toolbox, REPO, VENV_PY, timeout_s=120)
    assert raw is not None and raw["pyright"] is None
    g = grade_c0(raw, 10)
    assert g["c0_status"] == "not_run" and g["failure_category"] == "infra_toolbox" and g["c0_missing"] is None
    assert "node" in g["reason"]
    # No toolbox at all: the probe leaves no record; still not_run (infra), never 0.
    sh(sandbox, f"rm -rf {toolbox}")
    raw = run_c0(sandbox, toolbox, REPO, VENV_PY, timeout_s=120)
    assert raw is None
    g = grade_c0(raw, 10)
    assert g["c0_status"] == "not_run" and g["failure_category"] == "infra_toolbox" and g["c0_missing"] is None


def test_agent_venv_inside_the_repo_is_used_not_analysed(sandbox):
    """`uv venv`-style .venv inside the repository, reported as the interpreter."""
    python = make_venv(sandbox, f"{REPO}/.venv", packages=["numpy"])
    fake_packages(sandbox, f"{REPO}/.venv/lib/python3.11/site-packages", ["junk"])
    write_files(sandbox, REPO, {
        "main.py": "import numpy\nimport missing_here\n",
        ".venv/lib/python3.11/site-packages/junk/mod.py": "import junk_dependency\n",
    })
    raw, g = probe(sandbox, python, baseline=2)
    assert g["c0_missing_modules"] == ["missing_here"], g
    assert f"{REPO}/.venv/lib/python3.11/site-packages" in raw["interpreter_site_packages"]


def test_reported_interpreter_that_does_not_exist_is_the_agents_failure_with_every_import_missing(sandbox):
    """Issue 9 item 1: no free C0 for an interpreter that does not run."""
    write_files(sandbox, REPO, {"main.py": "import numpy\n"})
    raw, g = probe(sandbox, "/opt/envs/nope/bin/python", baseline=10)
    assert raw is not None and raw["python_ok"] is False
    assert (g["c0_status"], g["c0_missing"], g["failure_category"]) == ("failure", 10, "interpreter_broken")


def test_f05_guarded_imports_end_to_end(sandbox):
    make_venv(sandbox, packages=["hardpkg"])
    write_files(sandbox, REPO, {"train.py": (
        "import hardpkg\n"
        "try:\n"
        "    import apex\n"
        "except ImportError:\n"
        "    apex = None\n"
        "try:\n"
        "    import deepspeed\n"
        "except ImportError:\n"
        "    deepspeed = None\n"
    )})
    raw, g = probe(sandbox, VENV_PY, baseline=3)
    assert g["c0_status"] == "failure"
    assert g["c0_missing"] == 2 and g["c0_missing_modules"] == ["apex", "deepspeed"]
    assert g["c0_guarded_modules"] == ["apex", "deepspeed"]
    assert sorted(map(tuple, raw["guarded_imports"])) == [("train.py", 3), ("train.py", 7)]


def test_f04_runtime_sys_path_edit_is_counted_and_told_apart(sandbox):
    """Field case F04: tools/train.py puts third_party/stylegan on sys.path and imports dnnlib.
    Python finds it at run time, pyright cannot: raw C0 = 1, and the record names it as a module
    of the repository (with the edit's line), not a missing package."""
    make_venv(sandbox, packages=["numpy"])
    write_files(sandbox, REPO, {
        "tools/train.py": "import os, sys\n"
                          "sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'third_party', 'stylegan'))\n"
                          "import dnnlib\nimport numpy\nprint(dnnlib.EasyDict)\n",
        "third_party/stylegan/dnnlib/__init__.py": "from .util import EasyDict\n",
        "third_party/stylegan/dnnlib/util.py": "class EasyDict(dict): ...\n",
    })
    assert "EasyDict" in sh(sandbox, f"cd {REPO} && {VENV_PY} tools/train.py")  # Python resolves it
    raw, g = probe(sandbox, VENV_PY, baseline=4)
    assert g["c0_missing"] == 1 and g["c0_missing_modules"] == ["dnnlib"], g
    assert g["c0_repo_path_modules"] == ["dnnlib"] and g["c0_guarded_modules"] == []
    assert raw["sys_path_edits"] == [["tools/train.py", 2]]
    assert raw["nested_modules"]["dnnlib"] == "third_party/stylegan"


def test_a_missing_package_named_like_a_repo_folder_without_path_edits_is_not_told_apart(sandbox):
    make_venv(sandbox)
    write_files(sandbox, REPO, {"train.py": "import transformers\n", "docs/transformers/notes.py": ""})
    raw, g = probe(sandbox, VENV_PY, baseline=1)
    assert g["c0_missing_modules"] == ["transformers"] and g["c0_repo_path_modules"] == []
    assert raw["sys_path_edits"] == []


BAR_FILES = {
    "libs/bar/pyproject.toml": '[build-system]\nrequires = ["setuptools>=64"]\nbuild-backend = "setuptools.build_meta"\n',
    "libs/bar/setup.py": 'from setuptools import setup\nsetup(name="bar", version="0.1", packages=["bar"], package_dir={"bar": "src/impl"})\n',
    "libs/bar/src/impl/__init__.py": "",
    "libs/bar/src/impl/consts.py": "X = 1\n",
    "main.py": "from bar.consts import X\nprint(X)\n",
}


@pytest.mark.parametrize("mode,hook", [("default", True), ("strict", False)])
def test_f01_editable_install_via_import_hook(sandbox, mode, hook):
    """`package_dir` maps bar -> src/impl. Default editable mode installs an import hook that
    Python follows (C1 would pass) and pyright cannot: C0 counts `bar`, and the record says a
    hook-style install is present. Strict mode (a static link tree) resolves for pyright."""
    sh(sandbox, f"python3 -m venv --system-site-packages --without-pip {VENV}")  # pip/setuptools/wheel from the image
    write_files(sandbox, REPO, BAR_FILES)
    settings = "" if mode == "default" else f"--config-settings editable_mode={mode}"
    sh(sandbox, f"cd {REPO} && {VENV_PY} -m pip install -q --no-index --no-build-isolation -e libs/bar {settings}")
    assert sh(sandbox, f"cd {REPO} && {VENV_PY} main.py").strip() == "1"  # Python imports it
    raw, g = probe(sandbox, VENV_PY, baseline=1)
    if hook:
        assert g["c0_missing_modules"] == ["bar"], g
        assert g["c0_editable_hooks"] == ["__editable__.bar-0.1.pth"]
        assert raw["editable_hook_installs"] == ["__editable__.bar-0.1.pth"]
    else:
        assert g["c0_status"] == "success" and g["c0_missing"] == 0, g
        assert g["c0_editable_hooks"] == []


def test_local_provider_runs_the_same_probe(tmp_path):
    """The local provider gets a per-sandbox toolbox copy and runs the same probe on the host."""
    with open_sandbox("local", SandboxConfig(), trusted=True) as sb:
        repo = f"{sb.workdir}/repo"
        write_files(sb, repo, {"main.py": "import os\nimport surely_missing_pkg\n"})
        toolbox = install_toolbox(sb)
        assert toolbox.startswith(sb.workdir.rsplit("/", 1)[0]) and toolbox != TOOLBOX_SANDBOX_PATH
        raw = run_c0(sb, toolbox, repo, "/usr/bin/python3", timeout_s=300)
        g = grade_c0(raw, 2)
        assert g["c0_missing_modules"] == ["surely_missing_pkg"], (g, raw and raw.get("pyright_stderr_tail"))

