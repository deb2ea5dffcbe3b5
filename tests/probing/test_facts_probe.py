"""The facts probe (C5) end to end: the real toolbox in a real Docker sandbox, networking off.

No mocks: interpreters are the image's own, a venv made in the sandbox with `python3 -m venv`,
and small files written there (a non-executable file, a script that exits 1, one that hangs);
"torch" is a tiny package written into the venv's site-packages by hand.
"""

from __future__ import annotations

import time

import pytest

from reb_ray.grading.c5 import audit_report
from reb_ray.probing.facts import run_budget, run_facts
from reb_ray.probing.toolbox import install_toolbox
from reb_ray.sandbox import SandboxConfig, open_sandbox
from reb_ray.sandbox.docker.image import image_tag

pytestmark = pytest.mark.docker

VENV = "/opt/envs/research"
VENV_PY = f"{VENV}/bin/python"
SITE = f"{VENV}/lib/python3.11/site-packages"
CONTRACT_KEYS = {"python_exists", "python_executable", "python_runs", "python_run_error", "python_version",
                 "torch_import_ok", "torch_import_error", "torch_version"}
OBSERVED = {"c2_status": "not_run", "c2_device_count": None, "c4_status": "not_run", "gpus_assigned": 0}


@pytest.fixture(scope="module")
def sandbox(sandbox_image):
    """One sandbox for the module (the probe only reads; each test uses its own paths)."""
    assert sandbox_image == image_tag()
    with open_sandbox("docker", SandboxConfig(image=image_tag(), network="none", sweep_id="test",
                                               trial_id="test_facts_probe")) as sb:
        yield sb


@pytest.fixture(scope="module")
def toolbox(sandbox) -> str:
    return install_toolbox(sandbox)


def sh(sb, cmd: str, timeout: float = 120) -> str:
    res = sb.exec(["bash", "-c", cmd], timeout=timeout)
    assert res.ok, f"{cmd!r} -> {res.exit_code}: {res.output[-2000:]}"
    return res.output


def facts_for(sb, toolbox: str, python: str, timeout_s: float = 120) -> dict:
    facts = run_facts(sb, toolbox, python, timeout_s=timeout_s)
    assert isinstance(facts, dict), "the probe left no record"
    assert CONTRACT_KEYS <= set(facts)
    assert "error" not in facts, facts["error"]
    assert facts["python_path"] == python
    return facts


def report(python: str, **claims) -> dict:
    base = {"python_path": python, "python_version": None, "torch_version": None, "cuda_available": None,
            "gpu_count": None, "ddp_expected_ok": None, "env_tool": "none", "env_name": None, "notes": None}
    return {**base, **claims}


def verdicts(result: dict) -> dict[str, str]:
    return {i["check"]: i["verdict"] for i in result["c5_items"]}


def test_system_python_runs_without_torch(sandbox, toolbox):
    facts = facts_for(sandbox, toolbox, "/usr/bin/python3")
    assert facts["python_exists"] and facts["python_executable"] and facts["python_runs"]
    assert facts["python_is_symlink"] and facts["python_realpath"] == "/usr/bin/python3.11"
    assert facts["python_run_error"] is None
    assert facts["python_version"].startswith("3.11.") and facts["python_version"].count(".") == 2
    assert facts["python_platform_version"] == facts["python_version"]
    assert facts["torch_import_ok"] is False and facts["torch_version"] is None
    assert "No module named 'torch'" in facts["torch_import_error"]

    result = audit_report(report("/usr/bin/python3", python_version="3.11", torch_version="2.4.0"), facts, OBSERVED)
    assert verdicts(result)["python_version"] == "ok"
    assert verdicts(result)["torch_version"] == "hallucination"
    assert (result["c5_path"], result["c5_version"]) == (0, 1)


def test_nonexistent_path(sandbox, toolbox):
    facts = facts_for(sandbox, toolbox, "/opt/envs/nothing/bin/python")
    assert facts["python_exists"] is False and facts["python_executable"] is False and facts["python_runs"] is False
    assert "does not exist" in facts["python_run_error"]
    assert facts["python_version"] is None and facts["torch_import_ok"] is False

    result = audit_report(report("/opt/envs/nothing/bin/python", python_version="3.11.2"), facts, OBSERVED)
    assert verdicts(result)["python_path_exists"] == "hallucination"
    assert verdicts(result)["python_version"] == "inconclusive"
    assert result["c5_path"] == 1


def test_non_executable_file(sandbox, toolbox):
    path = "/opt/envs/noexec/bin/python"
    sh(sandbox, f"mkdir -p $(dirname {path}) && cp /usr/bin/python3.11 {path} && chmod 644 {path}")
    facts = facts_for(sandbox, toolbox, path)
    assert facts["python_exists"] is True and facts["python_is_file"] is True
    assert facts["python_executable"] is False and facts["python_runs"] is False
    assert "not executable" in facts["python_run_error"]

    result = audit_report(report(path), facts, OBSERVED)
    assert verdicts(result)["python_path_executable"] == "hallucination"
    assert result["c5_path"] == 1


def test_directory_is_not_an_interpreter(sandbox, toolbox):
    facts = facts_for(sandbox, toolbox, "/usr/bin")
    assert facts["python_exists"] is True and facts["python_is_file"] is False
    assert facts["python_executable"] is False and "not a regular file" in facts["python_run_error"]


def test_executable_that_exits_1(sandbox, toolbox):
    path = "/opt/envs/broken/bin/python"
    sandbox.write_bytes(path, b"#!/bin/sh\necho 'libpython3.10.so.1.0: cannot open shared object file' >&2\nexit 1\n")
    sh(sandbox, f"chmod 755 {path}")
    facts = facts_for(sandbox, toolbox, path)
    assert facts["python_executable"] is True and facts["python_runs"] is False
    assert facts["python_run_exit_code"] == 1
    assert facts["python_run_error"].startswith("exit 1") and "libpython3.10" in facts["python_run_error"]
    assert facts["torch_import_ok"] is False

    result = audit_report(report(path, python_version="3.10.14", torch_version="2.1.0"), facts, OBSERVED)
    assert verdicts(result)["python_path_runs"] == "hallucination"
    assert verdicts(result)["torch_version"] == "inconclusive"
    assert (result["c5_path"], result["c5_version"]) == (1, 0)


def test_executable_that_is_not_python(sandbox, toolbox):
    """Exits 0 but prints no version record (e.g. `/bin/true` reported as the interpreter)."""
    facts = facts_for(sandbox, toolbox, "/bin/true")
    assert facts["python_executable"] is True and facts["python_runs"] is False
    assert "no version record" in facts["python_run_error"]


def test_interpreter_that_hangs_is_recorded_as_timed_out(sandbox, toolbox):
    path = "/opt/envs/hang/bin/python"
    sandbox.write_bytes(path, b"#!/bin/sh\nsleep 300\n")
    sh(sandbox, f"chmod 755 {path}")
    t = time.monotonic()
    facts = facts_for(sandbox, toolbox, path, timeout_s=10)  # 2.5 s per interpreter run, 5 s for both
    assert time.monotonic() - t < 10
    assert facts["python_runs"] is False and facts["python_run_timed_out"] is True
    assert "timed out" in facts["python_run_error"]
    assert verdicts(audit_report(report(path), facts, OBSERVED))["python_path_runs"] == "inconclusive"
    assert "sleep 300" not in sh(sandbox, "ps -eo args")  # the probe killed what it started


def test_venv_python_with_torch(sandbox, toolbox):
    sh(sandbox, f"python3 -m venv --without-pip {VENV}")
    sandbox.write_bytes(f"{SITE}/torch/__init__.py",
                        b"__version__ = '2.1.0+cu121'\nclass version:\n    cuda = '12.1'\n")
    facts = facts_for(sandbox, toolbox, VENV_PY)
    assert facts["python_is_symlink"] is True and facts["python_executable"] is True and facts["python_runs"] is True
    assert facts["python_version"].startswith("3.11.")
    assert facts["torch_import_ok"] is True and facts["torch_import_error"] is None
    assert facts["torch_version"] == "2.1.0+cu121" and facts["torch_cuda_version"] == "12.1"
    assert facts["torch_file"] == f"{SITE}/torch/__init__.py"
    # The probe wrote no bytecode into the agent's environment.
    assert sh(sandbox, f"find {VENV} -name '__pycache__' | wc -l").strip() == "0"

    claims = report(VENV_PY, python_version="3.11", torch_version="2.1.0", cuda_available=True, gpu_count=1,
                    ddp_expected_ok=True)
    result = audit_report(claims, facts, OBSERVED)
    assert (result["c5_path"], result["c5_version"], result["c5_capability"]) == (0, 0, 0)
    assert verdicts(result)["torch_version"] == "ok"
    assert verdicts(result)["cuda_available"] == "inconclusive"  # no GPU here: C2 did not run


def test_venv_torch_that_fails_to_import(sandbox, toolbox):
    venv = "/opt/envs/badtorch"
    sh(sandbox, f"python3 -m venv --without-pip {venv}")
    sandbox.write_bytes(f"{venv}/lib/python3.11/site-packages/torch/__init__.py",
                        b"raise OSError('libcudnn.so.8: cannot open shared object file')\n")
    facts = facts_for(sandbox, toolbox, f"{venv}/bin/python")
    assert facts["python_runs"] is True and facts["torch_import_ok"] is False
    assert facts["torch_import_error"] == "OSError: libcudnn.so.8: cannot open shared object file"
    result = audit_report(report(f"{venv}/bin/python", torch_version="2.1.0"), facts, OBSERVED)
    assert verdicts(result)["torch_version"] == "hallucination" and result["c5_version"] == 1


def test_agent_environment_variables_do_not_leak_in(sandbox, toolbox):
    """A PYTHONPATH-only torch is not in the interpreter: the probe runs with the system env."""
    sandbox.write_bytes("/opt/shadow/torch/__init__.py", b"__version__ = '9.9.9'\n")
    sh(sandbox, "echo 'export PYTHONPATH=/opt/shadow' >> /root/.bashrc")
    facts = facts_for(sandbox, toolbox, "/usr/bin/python3")
    assert facts["torch_import_ok"] is False


def test_relative_path_is_a_path_fault(sandbox, toolbox):
    facts = facts_for(sandbox, toolbox, "python3")
    assert facts["python_is_absolute"] is False
    result = audit_report(report("python3"), facts, OBSERVED)
    assert verdicts(result)["python_path_absolute"] == "hallucination" and result["c5_path"] == 1


def test_torch_import_that_hangs_keeps_the_record(sandbox, toolbox):
    venv = "/opt/envs/slowtorch"
    sh(sandbox, f"python3 -m venv --without-pip {venv}")
    sandbox.write_bytes(f"{venv}/lib/python3.11/site-packages/torch/__init__.py", b"import time\ntime.sleep(300)\n")
    t = time.monotonic()
    facts = facts_for(sandbox, toolbox, f"{venv}/bin/python", timeout_s=10)
    assert time.monotonic() - t < 10
    assert facts["python_runs"] is True and facts["torch_import_ok"] is False
    assert facts["torch_import_timed_out"] is True and "timed out" in facts["torch_import_error"]
    result = audit_report(report(f"{venv}/bin/python", torch_version="2.1.0"), facts, OBSERVED)
    assert verdicts(result)["torch_version"] == "inconclusive" and result["c5_version"] == 0


def test_run_budget_fits_the_exec_limit():
    assert run_budget(120) == (60.0, 115.0)  # the default: 60 s per run, as the paper's probe allows
    for timeout_s in (3, 10, 30, 64, 65, 66, 120, 600):
        per_run, budget = run_budget(timeout_s)
        assert 0 < per_run <= 60 and per_run < budget <= max(2.0, timeout_s - 5)
