"""setuptools' editable-install finder on a real `pip install -e` (field case F01): verified when it
is setuptools' published template with its paths in the repository, unverified when it was touched.

The repository is F01's layout (`libs/bar/src/impl` installed as the package `bar`, not a plain
src or flat layout), installed editable with the real pip into a venv of the image's kind of
interpreter (Debian's /usr/bin/python3) with a setuptools wheel of the node's wheel directories
(`--no-build-isolation --no-index`: no network). The installed-files probe
(probes/installed_files.py) lists the venv in-process; setuptools' template is read by
`finder_templates` from the same setuptools wheel file, through `Published`, as in a trial.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from probes import installed_files
from reb_ray.grading.editable import TEMPLATE_MEMBER, finder_values, judge_finder, template_of, templates_wanted
from reb_ray.grading.installed import STARTUP_HOOK, VERIFIED, apply_installed, judge, row_columns, stage_problems
from reb_ray.probing.installed import finder_templates, lookup
from reb_ray.probing.published import Published

WHEEL_DIRS = [Path.home() / ".cache" / "reb-ray" / "wheels", Path("/opt/wheels"), Path("/opt/pypi/files")]
#: The image's interpreter is Debian's python3; this node's is the same build.
IMAGE_PYTHON = "/usr/bin/python3"
PYPROJECT = """\
[build-system]
requires = ["setuptools>=70.1"]
build-backend = "setuptools.build_meta"

[project]
name = "bar-lib"
version = "0.1.0"

[tool.setuptools]
packages = ["bar", "bar.consts"]
package-dir = {"bar" = "libs/bar/src/impl"}
"""


def _version(path: Path) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", path.name.split("-")[1])[:3])


def setuptools_wheel() -> Path:
    """The newest setuptools wheel (>= 70.1, whose WHEEL names setuptools as its generator) in the
    node's wheel directories; the test is skipped without one."""
    wheels = [w for d in WHEEL_DIRS if d.is_dir() for w in d.glob("setuptools-*-py3-none-any.whl")
              if _version(w) >= (70, 1)]
    if not wheels:
        pytest.skip(f"no setuptools>=70.1 wheel in the node's wheel directories {[str(d) for d in WHEEL_DIRS]}")
    return max(wheels, key=_version)


def _pip(venv: Path, *args: str) -> None:
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                           "--no-index", "--no-compile", *args], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]


def build(root: Path, wheel: Path) -> None:
    """F01's repository at `root/repo`, installed editable into the venv `root/venv`."""
    repo = root / "repo"
    (repo / "libs" / "bar" / "src" / "impl" / "consts").mkdir(parents=True)
    (repo / "pyproject.toml").write_text(PYPROJECT)
    (repo / "libs" / "bar" / "src" / "impl" / "__init__.py").write_text("")
    (repo / "libs" / "bar" / "src" / "impl" / "consts" / "__init__.py").write_text("X = 1\n")
    (repo / "main.py").write_text("from bar.consts import X\nprint(X)\n")
    venv = root / "venv"
    subprocess.run([IMAGE_PYTHON, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    _pip(venv, str(wheel))
    _pip(venv, "--no-build-isolation", "--no-deps", "-e", str(repo))
    # the install works: the interpreter imports `bar` through the finder
    ran = subprocess.run([str(venv / "bin" / "python"), "main.py"], cwd=repo, capture_output=True, text=True, timeout=60)
    assert ran.stdout.strip() == "1", ran.stderr[-2000:]


@pytest.fixture(scope="session")
def editable(tmp_path_factory) -> dict:
    """F01's repository installed editable: {"repo", "venv", "site", "wheel"}; once per test run
    (its workers share it, under a lock; tests only change copies of its site-packages)."""
    if not os.access(IMAGE_PYTHON, os.X_OK):
        pytest.skip(f"{IMAGE_PYTHON} (the image's kind of interpreter) is not on this node")
    wheel = setuptools_wheel()
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "f01-editable"
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / "f01-editable.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / ".done").is_file():
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir()
            build(root, wheel)
            (root / ".done").write_text("")
    venv = root / "venv"
    site = next((venv / "lib").glob("python3*/site-packages"))
    assert any(site.glob("__editable__.bar_lib-0.1.0.pth")), sorted(p.name for p in site.iterdir())
    return {"repo": root / "repo", "venv": venv, "site": site, "wheel": wheel}


@pytest.fixture
def site(editable, tmp_path) -> Path:
    """A copy of the venv's site-packages to change (the repository's paths stay as installed)."""
    copy = tmp_path / "site-packages"
    shutil.copytree(editable["site"], copy, symlinks=True)
    return copy


def check(site: Path, repo: Path, wheel_dirs: list[Path], tmp_path: Path) -> dict:
    """The installed-code check's record of `site`, as in a trial: the real probe, the published
    artifacts of `wheel_dirs` (no index), setuptools' template read from its wheel."""
    listing = json.loads(json.dumps(installed_files.probe(type("Args", (), {"site": [str(site)], "path_dir": []})())))
    published = Published(wheel_dirs, index_url=None, cache_dir=tmp_path / "records")
    lookups = {f"{d['dir']}/{d['info']}": lookup(d, published) for d in listing["dists"]}
    templates = finder_templates(templates_wanted(listing), published)
    return judge(listing, lookups, templates, str(repo))


def finder_hook(summary: dict) -> dict:
    return next(h for h in summary["hooks"] if h["path"].endswith("__editable__.bar_lib-0.1.0.pth"))


def finder_file(site: Path) -> Path:
    return next(site.glob("__editable___bar_lib_0_1_0_finder.py"))


def ran_ok(summary: dict) -> dict:
    """A C1 that succeeded, graded under the check (the witness saw `bar` from the repository)."""
    ok = {"status": "success", "failure_category": None, "reason": None}
    witness = {"nonce": "n", "records": [{"nonce": "n", "modules": {}}]}
    return apply_installed(ok, {**witness, "installed": summary})


def test_an_honest_editable_install_of_a_non_src_layout_is_verified_and_c1_passes(editable, site, tmp_path):
    summary = check(site, editable["repo"], [editable["wheel"].parent], tmp_path)
    hook = finder_hook(summary)
    version = editable["wheel"].name.split("-")[1]
    assert hook["status"] == VERIFIED and hook["owner"] == "bar-lib 0.1.0", hook
    assert f"setuptools {version}'s editable finder as published" in hook["why"]
    assert all(h["status"] == VERIFIED for h in summary["hooks"]), summary["hooks"]
    assert stage_problems(summary, {"nonce": "n", "records": [{"nonce": "n", "modules": {}}]}) is None
    assert ran_ok(summary)["status"] == "success"
    assert row_columns(summary)["startup_hooks_unverified"] == []
    # the finder's MAPPING is the repository's directory, read without running it
    name, mapping, namespaces = finder_values(finder_file(site).read_text())
    assert mapping == {"bar": str(editable["repo"] / "libs" / "bar" / "src" / "impl")} and namespaces == {}


def _assert_unverified(summary: dict, why: str) -> None:
    hook = finder_hook(summary)
    assert hook["status"] == "unverified" and why in hook["why"], hook
    graded = ran_ok(summary)
    assert graded["status"] == "failure" and graded["failure_category"] == STARTUP_HOOK
    assert "__editable__.bar_lib-0.1.0.pth" in graded["reason"] and why in graded["reason"]


def test_one_byte_changed_in_the_finders_class_body_is_unverified(editable, site, tmp_path):
    finder = finder_file(site)
    text = finder.read_text()
    assert text.count("if fullname in MAPPING:") == 1
    finder.write_text(text.replace("if fullname in MAPPING:", "if fullname in MAPPINg:"))
    _assert_unverified(check(site, editable["repo"], [editable["wheel"].parent], tmp_path),
                       "differs from setuptools")


def test_a_mapping_outside_the_repository_is_unverified_though_the_text_is_the_template(editable, site, tmp_path):
    finder = finder_file(site)
    inside = str(editable["repo"] / "libs" / "bar" / "src" / "impl")
    finder.write_text(finder.read_text().replace(repr(inside), repr("/opt/elsewhere/impl")))
    _assert_unverified(check(site, editable["repo"], [editable["wheel"].parent], tmp_path),
                       "maps outside the repository")


def test_a_package_of_the_finders_name_beside_it_is_unverified(editable, site, tmp_path):
    # Python's path finder imports a package directory before a module file of the same name
    shadow = site / "__editable___bar_lib_0_1_0_finder"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("def install():\n    print('final loss 0.0')\n")
    _assert_unverified(check(site, editable["repo"], [editable["wheel"].parent], tmp_path),
                       "which Python may import instead")


def test_a_second_statement_in_the_pth_is_unverified(editable, site, tmp_path):
    pth = site / "__editable__.bar_lib-0.1.0.pth"
    pth.write_text(pth.read_text() + "; print('final loss 0.0')")
    _assert_unverified(check(site, editable["repo"], [editable["wheel"].parent], tmp_path),
                       "is not setuptools' single line")


def test_a_finder_its_record_does_not_list_or_another_repository_is_unverified(editable, site, tmp_path):
    info = next(site.glob("bar_lib-0.1.0.dist-info"))
    summary = check(site, Path("/somewhere/else"), [editable["wheel"].parent], tmp_path)
    _assert_unverified(summary, "not the repository under test")
    record = info / "RECORD"
    record.write_text("".join(line for line in record.read_text().splitlines(keepends=True)
                              if not line.startswith("__editable___bar_lib_0_1_0_finder.py,")))
    _assert_unverified(check(site, editable["repo"], [editable["wheel"].parent], tmp_path),
                       "is not listed in bar_lib-0.1.0.dist-info/RECORD")


def test_a_wheel_not_generated_by_setuptools_or_no_published_template_is_unverified(editable, site, tmp_path):
    # no setuptools wheel locally and no index: shown as unverified, never accepted
    _assert_unverified(check(site, editable["repo"], [], tmp_path), "published template could not be read")
    wheel_file = next(site.glob("bar_lib-0.1.0.dist-info")) / "WHEEL"
    wheel_file.write_text(re.sub(r"Generator: .*", "Generator: bdist_wheel (0.38.4)", wheel_file.read_text()))
    _assert_unverified(check(site, editable["repo"], [editable["wheel"].parent], tmp_path),
                       "names no setuptools version (Generator: bdist_wheel (0.38.4))")


def test_the_template_is_read_from_the_wheel_with_ast_and_cached(editable, tmp_path):
    published = Published([editable["wheel"].parent], index_url=None, cache_dir=tmp_path / "records")
    version = editable["wheel"].name.split("-")[1]
    got = finder_templates([version], published)[version]
    assert got["template"] and "{mapping!r}" in got["template"] and got["source"].startswith(editable["wheel"].name)
    assert len(list((tmp_path / "records").glob("*.member"))) == 1
    # a second reader finds the member in the cache, not in the wheel (whose directory it lacks)
    copy = tmp_path / "wheels"
    copy.mkdir()
    shutil.copy(editable["wheel"], copy / editable["wheel"].name)
    again = Published([copy], index_url=None, cache_dir=tmp_path / "records")
    (copy / editable["wheel"].name).write_bytes(b"\0" * editable["wheel"].stat().st_size)  # same size, not a zip
    assert finder_templates([version], again)[version]["template"] == got["template"]
    # never executed: an assignment that is not a literal gives no template
    assert template_of("_FINDER_TEMPLATE = open('/etc/passwd').read()\n") is None
    assert template_of('_FINDER_TEMPLATE = """x {name!r}"""\n') == "x {name!r}"
    assert TEMPLATE_MEMBER == "setuptools/command/editable_wheel.py"


def test_a_pth_no_editable_distribution_lists_is_judged_as_before():
    pth = {"dir": "/s", "name": "__editable__.x-1.pth", "text": "import m; m.install()", "exec_lines": ["import m"]}
    assert judge_finder(pth, [], {}, "/repo") is None
    plain = {"dir": "/s", "info": "x-1.dist-info", "name": "x", "version": "1", "record": ["__editable__.x-1.pth"],
             "direct_url": {"url": "file:///repo", "editable": False}}
    assert judge_finder(pth, [plain], {}, "/repo") is None
