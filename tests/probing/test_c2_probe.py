"""C2 end to end: probes/c2_probe.py run by real interpreters in real sandboxes, graded by grade_c2.

No mocks and no GPU: the Docker tests run in a sandbox (networking off) from the probing tests'
image (tests/probing/conftest.py: `torch_image`), whose venv holds the real CPU torch 2.13.0
wheel and its dependencies (numpy is none of them). The local-provider tests
use host venvs; the crash and hang paths put a `torch` package into a host venv whose import
really segfaults, hangs or raises (nothing in the probe or the harness is replaced).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reb_ray.grading.c2 import grade_c2
from reb_ray.probing.c2 import run_c2
from reb_ray.probing.toolbox import install_toolbox
from reb_ray.sandbox import SandboxConfig, open_sandbox
from tests.probing.conftest import TORCH_PY as VENV_PY, TORCH_VENV as VENV

SITE = f"{VENV}/lib/python3.11/site-packages"
BARE_PY = "/opt/envs/bare/bin/python"
NUMPY_WARNING = "UserWarning: Failed to initialize NumPy: No module named 'numpy'"


def sh(sb, cmd: str, timeout: float = 300) -> str:
    res = sb.exec(["bash", "-c", cmd], timeout=timeout)
    assert res.ok, f"{cmd!r} -> {res.exit_code}: {res.output[-2000:]}"
    return res.output


def timed_c2(sb, toolbox: str, python: str, visible: str, key: str, **kw) -> dict | None:
    return run_c2(sb, toolbox, python, visible, **kw)


@pytest.fixture(scope="module")
def torch_sandbox(torch_image):
    """One Docker sandbox (network off) with the toolbox, the CPU-torch venv and a bare venv."""
    config = SandboxConfig(image=torch_image, network="none", sweep_id="test", trial_id="c2-probe")
    with open_sandbox("docker", config) as sb:
        sh(sb, "python3 -m venv --without-pip /opt/envs/bare")
        toolbox = install_toolbox(sb)
        yield sb, toolbox


@pytest.mark.docker
def test_f07_cpu_torch_is_cpu_only_build(torch_sandbox):
    sb, toolbox = torch_sandbox
    before = sh(sb, f"find {VENV} -printf '%p %s %T@\\n' | sort")
    raw = timed_c2(sb, toolbox, VENV_PY, "0", "docker_probe_s")
    assert raw is not None
    print(json.dumps(raw, indent=1))
    assert raw["framework"] == "torch" and raw["torch_present"] is True
    assert raw["torch_version"] == "2.13.0+cpu" and raw["cuda_build"] is None
    assert raw["cuda_available"] is False and raw["device_count"] == 0 and raw["arch_list"] == []
    assert raw["kernel_attempted"] is False and raw["kernel_ok"] is False and raw["import_error"] is None
    assert raw["cuda_visible_devices"] == "0" and raw["python"] == VENV_PY and raw["python_version"] == "3.11.2"
    assert raw["torch_file"] == f"{SITE}/torch/__init__.py"
    assert raw["stage"] == "done" and raw["worker_exit_code"] == 0 and raw["worker_error"] is None
    # A real warning raised by `import torch` is captured (numpy is not installed).
    assert any(w.startswith(NUMPY_WARNING) for w in raw["warnings"]), raw["warnings"]
    assert "libcuda.so.1" in raw["libcuda_error"] and raw["nvidia_driver"] is None
    assert "c2 probe: framework torch" in raw["stdout_tail"]
    g = grade_c2(raw)
    assert (g["c2_status"], g["failure_category"]) == ("failure", "cpu_only_build"), g
    assert g["c2_torch_version"] == "2.13.0+cpu" and g["c2_cuda_build"] is None and g["c2_device_count"] == 0
    assert NUMPY_WARNING in g["c2_warning_text"]
    # The probe changed nothing in the agent's environment (no bytecode, no files).
    assert sh(sb, f"find {VENV} -printf '%p %s %T@\\n' | sort") == before


@pytest.mark.docker
def test_visible_gpus_reach_the_probe(torch_sandbox):
    sb, toolbox = torch_sandbox
    for visible in ("", "0,1"):
        raw = timed_c2(sb, toolbox, VENV_PY, visible, "docker_probe_s")
        assert raw is not None and raw["cuda_visible_devices"] == visible
        assert grade_c2(raw)["failure_category"] == "cpu_only_build"


@pytest.mark.docker
def test_venv_without_torch_is_no_framework(torch_sandbox):
    sb, toolbox = torch_sandbox
    raw = timed_c2(sb, toolbox, BARE_PY, "0", "docker_probe_s")
    assert raw is not None and raw["framework"] is None and raw["torch_present"] is False
    assert raw["tf"] is None and raw["jax"] is None and raw["python"] == BARE_PY
    g = grade_c2(raw)
    assert (g["c2_status"], g["failure_category"]) == ("failure", "no_framework"), g
    assert BARE_PY in g["reason"] and g["c2_torch_version"] is None and g["c2_device_count"] is None


@pytest.mark.docker
def test_missing_interpreter_is_not_run(torch_sandbox):
    sb, toolbox = torch_sandbox
    raw = run_c2(sb, toolbox, "/opt/envs/does-not-exist/bin/python", "0", timeout_s=60)
    assert raw is None
    g = grade_c2(raw)
    assert g["c2_status"] == "not_run" and g["failure_category"] is None


def test_local_provider_host_python_is_no_framework(slow_process):
    with open_sandbox("local", SandboxConfig(), trusted=True) as sb:
        toolbox = install_toolbox(sb)
        raw = timed_c2(sb, toolbox, sys.executable, "", "local_probe_s")
    assert raw is not None and raw["stage"] == "done" and raw["cuda_visible_devices"] == ""
    g = grade_c2(raw)
    assert (g["c2_status"], g["failure_category"]) == ("failure", "no_framework"), g


# -------------------------------------------------------------- crashes, hangs, broken imports

def venv_with_torch(root: Path, init: str) -> str:
    """A host venv whose `torch` package's __init__ is `init`; returns its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    site = next(root.glob("lib/python3*/site-packages"))
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text(init)
    return str(root / "bin" / "python")


@pytest.mark.parametrize("init, expect", [
    ("import ctypes\nctypes.string_at(0)\n", "SIGSEGV"),  # a native crash inside `import torch`
    ("raise ImportError('libcudart.so.12: cannot open shared object file: No such file or directory')\n",
     "libcudart.so.12: cannot open shared object file"),
])
def test_broken_torch_import_is_recorded(slow_process, tmp_path, init, expect):
    python = venv_with_torch(tmp_path / "venv", init)
    with open_sandbox("local", SandboxConfig(), trusted=True) as sb:
        raw = run_c2(sb, install_toolbox(sb), python, "0")
    assert raw is not None and raw["framework"] == "torch" and raw["torch_present"] is True
    assert expect in raw["import_error"] and raw["torch_version"] is None
    if expect == "SIGSEGV":  # the worker died: the supervisor names the stage; faulthandler's dump is kept
        assert raw["stage"] == "import" and raw["worker_exit_code"] == -11
        assert "Fatal Python error: Segmentation fault" in raw["stderr_tail"]
    else:  # a Python exception: the traceback tail, and the worker finishes normally
        assert raw["stage"] == "done" and raw["worker_error"] is None and "Traceback" in raw["import_error"]
    g = grade_c2(raw)
    assert (g["c2_status"], g["failure_category"]) == ("failure", "no_framework"), g
    assert expect in g["reason"]


def test_hanging_import_times_out_with_a_record(slow_process, tmp_path):
    python = venv_with_torch(tmp_path / "venv", "import time\ntime.sleep(600)\n")
    with open_sandbox("local", SandboxConfig(), trusted=True) as sb:
        t = time.monotonic()
        raw = run_c2(sb, install_toolbox(sb), python, "0", timeout_s=8)  # the worker gets max(8 - 20, 4) = 4 s
        elapsed = time.monotonic() - t
    assert raw is not None and raw["worker_timed_out"] is True and raw["stage"] == "import"
    assert "timed out after 4s in stage 'import'" in raw["import_error"]
    assert elapsed < 8
    assert grade_c2(raw)["failure_category"] == "no_framework"

