"""The heuristic agent's in-sandbox program: its pure parts as a module, and one real run in Docker."""

from __future__ import annotations

import ast
import importlib.util
import json
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "reb_ray" / "agents" / "heuristic_script.py"
IMPORTS = SCRIPT.with_name("heuristic_imports.py")
DEMO = ROOT / "tasks" / "demo"
REPORT_KEYS = {"python_path", "python_version", "torch_version", "cuda_available", "gpu_count",
               "ddp_expected_ok", "env_tool", "env_name", "notes"}


@pytest.fixture(scope="module")
def hs():
    """The script imported as a module (stdlib-only, no import-time effects), with its folder on
    sys.path while it loads, as when it runs as a program (it imports heuristic_imports beside it)."""
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        spec = importlib.util.spec_from_file_location("heuristic_script", SCRIPT)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return module


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize("path", [SCRIPT, IMPORTS])
def test_script_is_python38_syntax_and_stdlib_only(path):
    tree = ast.parse(path.read_text(), feature_version=(3, 8))
    tops = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    tops |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert tops <= set(sys.stdlib_module_names) | {"__future__", IMPORTS.stem}


# ---------------------------------------------------------------- requirements files

def test_requirements_follow_includes_and_drop_comments_options_and_urls(hs, tmp_path):
    write(tmp_path / "requirements" / "base.txt", "numpy>=1.20  # arrays\n-r base.txt\n")
    write(tmp_path / "pkg" / "setup.py", "")
    req = write(tmp_path / "requirements.txt", "\n".join([
        "# a comment",
        "-r requirements/base.txt",
        "--index-url https://example.org/simple",
        "-f /somewhere",
        "torch==2.1.0 \\",
        "    --hash=sha256:abc",
        "pyyaml ; python_version >= '3.8'",
        "-e ./pkg",
        "-e git+https://github.com/x/y.git#egg=y",
        "https://example.org/z.whl",
        "./pkg[extra]",
        "",
    ]))
    lines = hs.parse_requirements(req)
    pkg = str((tmp_path / "pkg").resolve())
    assert lines == ["numpy>=1.20", "torch==2.1.0", "pyyaml ; python_version >= '3.8'", "-e " + pkg, pkg + "[extra]"]


def test_environment_yml_pip_entries(hs, tmp_path):
    write(tmp_path / "req-extra.txt", "scipy\n")
    env = write(tmp_path / "environment.yml", "\n".join([
        "name: demo",
        "channels: [conda-forge]",
        "dependencies:",
        "  - python=3.10",
        "  - numpy=1.26  # conda, not pip",
        "  - pip",
        "  - pip:",
        "      - einops==0.7.0  # pinned",
        "      - 'hydra-core>=1.3'",
        "      - -r req-extra.txt",
        "      - git+https://github.com/x/y.git",
        "  - cudatoolkit=11.8",
        "variables:",
        "  - FOO: bar",
    ]))
    assert hs.parse_environment_yml(env) == ["einops==0.7.0", "hydra-core>=1.3", "scipy"]


def test_collect_requirements_orders_files_and_adds_project(hs, tmp_path):
    write(tmp_path / "requirements.txt", "numpy\n")
    write(tmp_path / "requirements-dev.txt", "pytest\nnumpy\n")
    write(tmp_path / "environment.yaml", "dependencies:\n  - pip:\n    - rich\n")
    write(tmp_path / "setup.py", "from setuptools import setup\nsetup()\n")
    lines, deps = hs.collect_requirements(tmp_path)
    assert lines == ["pytest", "numpy", "rich", "-e " + str(tmp_path.resolve())]
    assert deps == []


# ---------------------------------------------------------------- the project itself

PYPROJECT = '''
[build-system]
requires = ["setuptools>=61"]  # [not a table]

[project]
name = "demo"
keywords = ["a", "b"]
dependencies = [
    "numpy>=1.21",   # arrays
    'torch[opt]>=2.0; platform_system == "Linux"',
]

[project.optional-dependencies]
cli = ["click"]
"docs" = [
  "sphinx>=7",
]
all = ["demo[cli,docs]"]

[[tool.mypy.overrides]]
module = ["x"]

[tool.setuptools.packages.find]
where = ["src"]
'''


def test_pyproject_fallback_parser_reads_deps_and_extras(hs):
    data = hs.parse_pyproject_fallback(PYPROJECT)
    assert data["build-system"]["requires"] == ["setuptools>=61"]
    assert data["project"]["dependencies"] == ["numpy>=1.21", 'torch[opt]>=2.0; platform_system == "Linux"']
    extras = data["project"]["optional-dependencies"]
    assert extras == {"cli": ["click"], "docs": ["sphinx>=7"], "all": ["demo[cli,docs]"]}
    assert extras == tomllib.loads(PYPROJECT)["project"]["optional-dependencies"]


@pytest.mark.parametrize("with_tomllib", [True, False])
def test_pyproject_project_is_installed_editable_with_all_extras(hs, tmp_path, monkeypatch, with_tomllib):
    if not with_tomllib:
        monkeypatch.setattr(hs, "tomllib", None)
    write(tmp_path / "pyproject.toml", PYPROJECT)
    editable, deps = hs.project_target(tmp_path)
    assert editable == "-e %s[all,cli,docs]" % tmp_path.resolve()
    assert "click" in deps and "numpy>=1.21" in deps and "sphinx>=7" in deps


def test_setup_cfg_extras_and_non_project_pyproject(hs, tmp_path):
    write(tmp_path / "pyproject.toml", "[tool.black]\nline-length = 100\n")
    assert hs.project_target(tmp_path) == (None, [])
    write(tmp_path / "setup.py", "")
    write(tmp_path / "setup.cfg", "[options]\ninstall_requires =\n    numpy\n"
                                  "[options.extras_require]\ntest =\n    pytest\nviz = matplotlib\n")
    editable, deps = hs.project_target(tmp_path)
    assert editable == "-e %s[test,viz]" % tmp_path.resolve()
    assert sorted(deps) == ["matplotlib", "numpy", "pytest"]


def test_demo_pyproject_extra_without_tomllib(hs, monkeypatch):
    monkeypatch.setattr(hs, "tomllib", None)
    repo = DEMO / "pyproject-extra" / "repo"
    assert hs.project_target(repo) == ("-e %s[cli]" % repo.resolve(), ["numpy", "click"])


# ---------------------------------------------------------------- unresolved imports (the scan: test_heuristic_imports.py)

def test_missing_modules_asks_the_interpreter(hs):
    assert hs.missing_modules(sys.executable, ["json", "surely_not_a_module_xyz"]) == ["surely_not_a_module_xyz"]


# ---------------------------------------------------------------- find-links wheel pinning

@pytest.mark.parametrize("version,spec,ok", [
    ("2.13.0+cpu", "", True), ("2.13.0+cpu", ">=2.0", True), ("2.13.0+cpu", "==2.13.0", True),
    ("2.13.0+cpu", "==2.13", True), ("2.13.0+cpu", "==2.13.0+cu121", False), ("2.13.0+cpu", "<2.0", False),
    ("2.13.0+cpu", ">=1.13,<3", True), ("2.13.0+cpu", "<=2.12.1", False), ("2.13.0+cpu", "==2.*", True),
    ("2.13.0+cpu", "!=2.13.0", False), ("2.13.0+cpu", "~=2.10", True), ("2.13.0+cpu", "~=2.10.0", False),
    ("2.13.0+cpu", ">2.13.0", False), ("2.1.0rc1", ">=2.1.0", False), ("1.10.0", ">1.9", True),
])
def test_satisfies(hs, version, spec, ok):
    assert hs.satisfies(version, spec) is ok


def test_pinning_picks_a_compatible_find_links_wheel(hs, tmp_path, monkeypatch):
    wheels = tmp_path / "wheels"
    for name in ["torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
                 "torch-2.14.0+cpu-cp310-cp310-manylinux_2_28_x86_64.whl",  # wrong python
                 "torch-2.15.0-cp311-cp311-macosx_11_0_x86_64.whl",  # wrong platform
                 "torch-2.12.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
                 "Foo_Bar-1.0-py3-none-any.whl", "numpy-1.0.tar.gz"]:
        write(wheels / name, "")
    monkeypatch.setenv("PIP_FIND_LINKS", "https://example.org/links file://%s /nonexistent" % wheels)
    found = hs.find_links_wheels((3, 11), "x86_64")
    assert sorted(found) == ["foo-bar", "torch"]
    assert sorted(v for v, _ in found["torch"]) == ["2.12.0+cpu", "2.13.0+cpu"]
    assert hs.pin_to_wheel("torch", found) == "torch==2.13.0+cpu"
    assert hs.pin_to_wheel("Torch[opt] >= 2.0 ; sys_platform == 'linux'", found) == \
        "Torch[opt]==2.13.0+cpu ; sys_platform == 'linux'"
    assert hs.pin_to_wheel("torch<2.13", found) == "torch==2.12.0+cpu"
    assert hs.pin_to_wheel("torch==2.1.0", found) is None
    assert hs.pin_to_wheel("foo.bar", found) == "foo.bar==1.0"
    assert hs.pin_to_wheel("numpy", found) is None
    assert hs.pin_to_wheel("-e /work/repo", found) is None
    assert hs.find_links_wheels((3, 10), "aarch64") == {"foo-bar": [("1.0", "Foo_Bar-1.0-py3-none-any.whl")]}


def test_the_node_package_cache_never_chooses_versions(hs, tmp_path, monkeypatch):
    """The demo's torch-tiny failed: a noop trial's Debian setuptools 66.1.1 landed in the node's
    package cache, and pinning to it contradicted torch's setuptools>=77."""
    from reb_ray.sandbox.package_cache import CACHE_MOUNT

    assert hs.PACKAGE_CACHE == CACHE_MOUNT
    cache, wheels = tmp_path / "cache", tmp_path / "wheels"
    write(cache / "setuptools-66.1.1-py3-none-any.whl", "")
    write(wheels / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", "")
    monkeypatch.setattr(hs, "PACKAGE_CACHE", str(cache))
    monkeypatch.setenv("PIP_FIND_LINKS", "%s %s" % (cache, wheels))
    assert sorted(hs.find_links_wheels((3, 11), "x86_64")) == ["torch"]


def test_pin_lines_and_constraints_keep_transitive_torch_local(hs):
    wheels = {"torch": [("2.13.0+cpu", "t1.whl"), ("2.12.0+cpu", "t2.whl")], "foo-bar": [("1.0", "f.whl")]}
    lines = hs.pin_lines(["numpy", "torch>=2", "-e /r[x]", "torch"], wheels)
    assert lines == ["numpy", "torch==2.13.0+cpu", "-e /r[x]"]
    # a project's `torch>=2.0` and timm's unnamed torch stay on the local wheel through constraints
    assert hs.wheel_constraints(wheels, ["-e /r", "torch>=2.0"]) == ["foo-bar==1.0", "torch==2.13.0+cpu"]
    assert hs.wheel_constraints(wheels, ["torch<2.13", "Foo.Bar>=1"]) == ["foo-bar==1.0", "torch==2.12.0+cpu"]
    # a spec no local wheel meets leaves that project unconstrained: the repo's pin wins
    assert hs.wheel_constraints(wheels, ["torch==2.1.0", "foo_bar"]) == ["foo-bar==1.0"]


# ---------------------------------------------------------------- whole program

def test_failed_venv_still_writes_an_honest_report(hs, tmp_path):
    blocker = write(tmp_path / "file", "")
    report = tmp_path / "out" / "report.json"
    code = hs.main(["--repo", str(tmp_path), "--report", str(report), "--venv", str(blocker / "venv")])
    data = json.loads(report.read_text())
    assert code == 0 and set(data) == REPORT_KEYS
    assert data["python_path"] == sys.executable and data["env_tool"] == "none" and data["env_name"] is None
    assert data["python_version"] == "%d.%d.%d" % sys.version_info[:3]
    assert data["ddp_expected_ok"] is None and "failed" in data["notes"]


needs_system_wheels = pytest.mark.skipif(
    not any(Path("/usr/share/python-wheels").glob("pip-*.whl")), reason="no distribution pip wheel here")


@needs_system_wheels
def test_venv_gets_the_systems_pip_without_ensurepip(hs, tmp_path, slow_process):
    venv = tmp_path / "v"
    assert hs.create_venv(venv, str(venv / "bin" / "python"))
    wheel = next(Path("/usr/share/python-wheels").glob("pip-*.whl")).name.split("-")[1]
    site = next((venv / "lib").glob("python3*/site-packages"))
    assert (site / ("pip-%s.dist-info" % wheel)).is_dir() and (venv / "bin" / "pip").exists()
    assert not (site / "pip" / "__pycache__").exists(), "installed without byte-compiling, not by ensurepip"
    assert hs.run([str(venv / "bin" / "python"), "-m", "pip", "--version"])[0] == 0


def test_venv_falls_back_to_ensurepip_without_the_wheels(hs, tmp_path, slow_process):
    venv = tmp_path / "v"
    assert hs.create_venv(venv, str(venv / "bin" / "python"), wheels=tmp_path / "no-wheels")
    site = next((venv / "lib").glob("python3*/site-packages"))
    assert (site / "pip" / "__pycache__").is_dir(), "ensurepip byte-compiles what it installs"
    assert hs.run([str(venv / "bin" / "python"), "-m", "pip", "--version"])[0] == 0


def test_measure_reports_only_what_it_reached(hs, tmp_path, monkeypatch):
    assert hs.measure(sys.executable)["python_version"] == "%d.%d.%d" % sys.version_info[:3]
    write(tmp_path / "torch" / "__init__.py", "__version__ = '9.9'\n"
          "class cuda:\n    @staticmethod\n    def is_available():\n        import os; os.abort()\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    facts = hs.measure(sys.executable)
    assert facts["torch_version"] == "9.9" and facts["cuda_available"] is None and facts["gpu_count"] is None


@pytest.mark.docker
@pytest.mark.timeout(900)
def test_agent_in_docker_sandbox_fixes_import_name_mismatch(demo_sweep):
    """The heuristic agent's trial on import-name-mismatch in the shared demo sweep
    (tests/helpers/shared_runs.py): the script ran in a Docker sandbox with the wheelhouse, wrote
    an honest report, and the task's own command ran under the reported interpreter (C1 with a
    valid witness), its `import yaml, numpy` included (train.py imports both)."""
    import gzip

    from reb_ray.agents.heuristic import VENV

    row, stages = demo_sweep.row("heuristic", "import-name-mismatch"), demo_sweep.stages_of("heuristic", "import-name-mismatch")
    assert (row["status"], row["agent_exit_code"], row["report_status"]) == ("scored", 0, "ok"), row["failure_reason"]
    output = gzip.decompress((demo_sweep.output / row["agent_log_path"]).read_bytes()).decode()
    assert "[heuristic] step 5" in output
    data = json.loads(stages["report"]["raw"])
    assert set(data) == REPORT_KEYS
    assert data["python_path"] == VENV + "/bin/python" and data["env_tool"] == "venv"
    assert data["python_version"].startswith("3.") and data["torch_version"] is None
    assert data["cuda_available"] is None and data["gpu_count"] is None and data["ddp_expected_ok"] is None
    assert "PyYAML" in data["notes"]
    assert (row["c0_missing"], row["c0_total"]) == (0, 2)  # numpy and yaml resolve in the reported interpreter
    c1 = stages["c1"]
    command = tomllib.loads((DEMO / "import-name-mismatch" / "task.toml").read_text())["stages"]["cpu"]["command"]
    assert (c1["status"], c1["exit_code"], c1["witness_status"]) == ("success", 0, "valid"), c1["reason"]
    assert command in c1["command"] and "final loss" in (c1["log_head"] or "") + (c1["log_tail"] or "")


@pytest.mark.docker
@pytest.mark.timeout(900)
def test_agent_in_docker_sandbox_never_installs_a_repository_local_name(sandbox_image, tmp_path):
    """Issue 9 item 21 on a ClearerVoice-Studio layout: `dataloader/` (a namespace package beside
    train.py) is imported by bare name; PyPI also has a `dataloader`, which would shadow it."""
    from reb_ray.agents.base import AgentContext
    from reb_ray.agents.heuristic import VENV, HeuristicAgent
    from reb_ray.sandbox import SandboxConfig, open_sandbox
    from tests.agents.test_heuristic_imports import clearervoice_layout

    clearervoice_layout(tmp_path / "repo", regular_package=False)
    report = "/opt/scimlopsbench/report.json"
    config = SandboxConfig(image=sandbox_image, ca_bundle="/etc/ssl/certs/ca-certificates.crt",
                           sweep_id="test", trial_id="heuristic-local-names")
    with open_sandbox("docker", config) as sb:
        sb.put(tmp_path / "repo", "/work/repo")
        run = HeuristicAgent().run(sb, AgentContext(repo_dir="/work/repo", report_path=report, timeout_s=600))
        assert run.exit_code == 0, run.output[-3000:]
        installs = [ln for ln in run.output.splitlines() if ln.startswith("[heuristic] $") and " install " in ln]
        assert installs and not [ln for ln in installs if "dataloader" in ln or "models" in ln], installs
        notes = json.loads(sb.read_bytes(report))["notes"]
        assert "PyYAML" in notes and "numpy" in notes and "dataloader" not in notes, notes
        workdir = "/work/repo/train/speech_super_resolution"
        train = sb.exec([VENV + "/bin/python", "train.py"], timeout=60, workdir=workdir)
        assert train.ok, train.output
        where = sb.exec([VENV + "/bin/python", "-c", "import dataloader.dataloader as d; print(d.__file__)"],
                        timeout=60, workdir=workdir)
        assert where.ok and where.output.strip() == workdir + "/dataloader/dataloader.py", where.output
