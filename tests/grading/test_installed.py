"""The installed-code check on real published wheels: what a trojan, a stub, a forged RECORD and
an unowned start-up hook look like to it, and that an honest install is verified.

Each environment is a site-packages directory made by unpacking real wheels of the node's wheel
directories (a wheel install is an unpack plus the installer's own files), then changed the way
an agent would. The in-sandbox probe (probes/installed_files.py) runs in-process on it; the
published RECORDs come from the same wheel files through `Published`, as in a trial.
"""

from __future__ import annotations

import base64
import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from probes import installed_files
from reb_ray.grading.c0 import grade_c0
from reb_ray.grading.installed import (DIST_MODIFIED, MODIFIED, STARTUP_HOOK, UNMATCHED, UNOWNED_MODULE, UNVERIFIABLE,
                                       VERIFIED, apply_installed, judge, row_columns, stage_problems, unowned_by_check)
from reb_ray.grading.startup import grade_startup
from reb_ray.probing.installed import lookup
from reb_ray.probing.published import Published

WHEEL_DIRS = [Path.home() / ".cache" / "reb-ray" / "wheels", Path("/opt/wheels"), Path("/opt/pypi/files")]
NUMPY = "numpy-2.4.6-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"
SIX = "six-1.17.0-py2.py3-none-any.whl"


def _wheel(name: str) -> Path:
    for directory in WHEEL_DIRS:
        if (directory / name).is_file():
            return directory / name
    pytest.skip(f"{name} is in none of the node's wheel directories {[str(d) for d in WHEEL_DIRS]}")


def _b64(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def install(wheel: Path, site: Path) -> Path:
    """Unpack `wheel` into `site` as pip does (files, then INSTALLER and the RECORD kept); the
    dist-info directory."""
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
        info = next(n.split("/")[0] for n in archive.namelist() if n.endswith(".dist-info/RECORD"))
    (site / info / "INSTALLER").write_text("pip\n")
    return site / info


def rewrite_record(info: Path, site: Path, rel: str) -> None:
    """Put the current hash of `site/rel` into `info`'s RECORD (the forger's step)."""
    lines = (info / "RECORD").read_text().splitlines()
    digest = _b64((site / rel).read_bytes())
    out = [f"{rel},{digest},{(site / rel).stat().st_size}" if line.split(",")[0] == rel else line for line in lines]
    if not any(line.split(",")[0] == rel for line in lines):
        out.append(f"{rel},{digest},{(site / rel).stat().st_size}")
    (info / "RECORD").write_text("\n".join(out) + "\n")


def check(site: Path, tmp_path: Path, index: bool = False) -> dict:
    listing = installed_files.probe(type("Args", (), {"site": [str(site)], "path_dir": []})())
    published = Published([d for d in WHEEL_DIRS if d.is_dir()], index_url="https://pypi.org/simple" if index else None,
                          cache_dir=tmp_path / "records")
    lookups = {f"{d['dir']}/{d['info']}": lookup(d, published) for d in listing["dists"]}
    return judge(json.loads(json.dumps(listing)), lookups)


def by_name(summary: dict, name: str) -> dict:
    return next(d for d in summary["dists"] if d["name"] == name)


def witness(site: Path, modules: dict[str, str]) -> dict:
    """A collected witness record of one interpreter that imported `modules` {top: file}."""
    return {"nonce": "n", "records": [{"nonce": "n", "modules": {t: {"file": str(site / f), "dist": None}
                                                                   for t, f in modules.items()}}]}


@pytest.fixture
def site(tmp_path) -> Path:
    path = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    path.mkdir(parents=True)
    return path


def test_an_honest_install_is_verified_and_passes(site, tmp_path):
    install(_wheel(NUMPY), site)
    install(_wheel(SIX), site)
    summary = check(site, tmp_path)
    assert {d["name"]: d["status"] for d in summary["dists"]} == {"numpy": VERIFIED, "six": VERIFIED}
    assert summary["loose"] == [] and summary["hooks"] == []
    ok = {"status": "success", "failure_category": None, "reason": None}
    w = witness(site, {"numpy": "numpy/__init__.py", "six": "six.py"})
    assert apply_installed(ok, {**w, "installed": summary}) == ok
    assert row_columns(summary) == {"dist_checked": 2, "dist_modified": [], "dist_unmatched": [],
                                    "dist_unverifiable": [], "startup_hooks_unverified": []}


def test_a_trojan_with_its_record_rewritten_is_modified_and_fails_the_stage(site, tmp_path):
    info = install(_wheel(NUMPY), site)
    init = site / "numpy" / "__init__.py"
    init.write_text(init.read_text() + "\nimport sys\nif sys.argv[0].endswith('train.py'):\n"
                                       "    print('final loss 0.0'); raise SystemExit(0)\n")
    rewrite_record(info, site, "numpy/__init__.py")
    summary = check(site, tmp_path)
    numpy = by_name(summary, "numpy")
    assert numpy["status"] == MODIFIED and numpy["modified"] == ["numpy/__init__.py"]
    graded = apply_installed({"status": "success", "failure_category": None, "reason": None},
                             {**witness(site, {"numpy": "numpy/__init__.py"}), "installed": summary})
    assert graded["status"] == "failure" and graded["failure_category"] == DIST_MODIFIED
    assert "numpy 2.4.6" in graded["reason"] and "numpy/__init__.py" in graded["reason"]
    assert row_columns(summary)["dist_modified"] == ["numpy 2.4.6: numpy/__init__.py"]
    # C0 counts it unowned, whatever the sandbox's RECORD says
    owners = {"numpy": {"owner": "distribution", "path": str(init), "name": "numpy"}}
    assert unowned_by_check(owners, summary) == ["numpy"]


def test_a_trojan_in_another_dependency_is_found_and_a_file_added_to_a_package_too(site, tmp_path):
    install(_wheel(NUMPY), site)
    info = install(_wheel(SIX), site)
    (site / "six.py").write_text((site / "six.py").read_text().replace("PY2 = ", "PY2 = 0 and "))
    rewrite_record(info, site, "six.py")
    (site / "numpy" / "_extra.py").write_text("print('hello')\n")
    summary = check(site, tmp_path)
    assert by_name(summary, "six")["status"] == MODIFIED
    numpy = by_name(summary, "numpy")
    assert numpy["status"] == MODIFIED and numpy["added"] == ["numpy/_extra.py"]
    found = stage_problems(summary, witness(site, {"six": "six.py"}))
    assert found[0] == DIST_MODIFIED and "six 1.17.0" in found[1]


def test_a_stub_in_site_packages_is_unowned_and_a_forged_dist_info_matches_nothing(site, tmp_path):
    (site / "numpy.py").write_text("print('final loss 0.0')\n")
    summary = check(site, tmp_path)
    assert [e["name"] for e in summary["loose"]] == ["numpy"]
    found = stage_problems(summary, witness(site, {"numpy": "numpy.py"}))
    assert found[0] == UNOWNED_MODULE and "numpy" in found[1]
    # the same stub with a hand-written numpy-2.4.6.dist-info whose RECORD fits it
    info = site / "numpy-2.4.6.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: numpy\nVersion: 2.4.6\n\n")
    (info / "WHEEL").write_text("Wheel-Version: 1.0\nTag: cp311-cp311-manylinux_2_27_x86_64\n")
    (info / "RECORD").write_text(f"numpy.py,{_b64((site / 'numpy.py').read_bytes())},24\nnumpy-2.4.6.dist-info/RECORD,,\n")
    summary = check(site, tmp_path)
    forged = by_name(summary, "numpy")
    assert forged["status"] == UNMATCHED and summary["loose"] == []
    assert stage_problems(summary, witness(site, {"numpy": "numpy.py"}))[0] == UNOWNED_MODULE
    # C0: the probe's own ownership calls it a distribution's; the check does not
    raw = {"python_ok": True, "pyright": {"generalDiagnostics": []}, "search_paths": [str(site)],
           "interpreter_site_packages": [str(site)], "installed": summary,
           "import_owners": {"numpy": {"owner": "distribution", "path": str(site / "numpy.py"), "name": "numpy"}}}
    c0 = grade_c0(raw, 1)
    assert c0["c0_status"] == "success" and c0["c0_unowned"] == 1 and c0["c0_unowned_modules"] == ["numpy"]
    # a version no local artifact has, with no index to ask: unverifiable (shown, not failed)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: numpy\nVersion: 99.0\n\n")
    assert by_name(check(site, tmp_path), "numpy")["status"] == UNVERIFIABLE


def _index_answers() -> bool:
    import urllib.request

    try:
        urllib.request.urlopen("https://pypi.org/simple/", timeout=5).close()
        return True
    except OSError:
        return False


def test_the_index_says_a_version_was_never_published_and_serves_a_record_by_range_reads(site, tmp_path):
    if not _index_answers():
        pytest.skip("the package index https://pypi.org/simple is not reachable from here")
    info = site / "numpy-99.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: numpy\nVersion: 99.0\n\n")
    (site / "numpy.py").write_text("print('final loss 0.0')\n")
    (info / "RECORD").write_text(f"numpy.py,{_b64((site / 'numpy.py').read_bytes())},24\n")
    numpy = by_name(check(site, tmp_path, index=True), "numpy")
    assert numpy["status"] == UNMATCHED and "no published artifact of numpy==99.0" in numpy["why"]
    # a remote wheel's RECORD, read by range requests, is the local copy's
    published = Published([], cache_dir=None)
    remote = next(a for a in published.candidates("six", "1.17.0") if a.kind == "wheel")
    local = Published([_wheel(SIX).parent]).local_candidates("six", "1.17.0")[0]
    assert published.record(remote) == Published([]).record(local) and published.remote_requests <= 4


def test_an_executable_pth_no_distribution_owns_fails_the_stage_and_is_named(site, tmp_path):
    install(_wheel(NUMPY), site)
    (site / "zz_fake.pth").write_text("import sys; exec('if sys.argv[-1:] == [\"train.py\"]: print(1)')\n")
    (site / "paths.pth").write_text("/opt/extra\n")  # a path line runs nothing: not a hook
    summary = check(site, tmp_path)
    assert [(h["kind"], h["status"]) for h in summary["hooks"]] == [("pth", "unverified")]
    found = stage_problems(summary, witness(site, {"numpy": "numpy/__init__.py"}))
    assert found[0] == STARTUP_HOOK and "zz_fake.pth" in found[1] and "no distribution owns it" in found[1]
    row = grade_startup({"python_kind": {"kind": "elf"}, "interpreter": {}, "hooks": [
        {"kind": "pth", "path": str(site / "zz_fake.pth"), "owner": "unowned"}]}, installed=summary)
    assert row["startup_hooks_unverified"] and "zz_fake.pth" in row["startup_hooks"][0]


def test_a_sitecustomize_in_the_site_dir_is_a_hook_unless_a_verified_wheel_installed_it(site, tmp_path):
    install(_wheel(NUMPY), site)
    (site / "sitecustomize.py").write_text("print('hi')\n")
    listing = installed_files.probe(type("Args", (), {"site": [str(site)], "path_dir": []})())
    assert [c["kind"] for c in listing["customize"]] == ["sitecustomize"]
    summary = check(site, tmp_path)
    hooks = [h for h in summary["hooks"] if h["kind"] == "sitecustomize"]
    assert hooks and hooks[0]["status"] == "unverified"


def test_a_local_build_is_unverifiable_never_a_failure(site, tmp_path):
    info = install(_wheel(SIX), site)
    (info / "direct_url.json").write_text(json.dumps({"url": "file:///work/repo", "dir_info": {}}))
    (site / "six.py").write_text("# built locally\n")
    summary = check(site, tmp_path)
    six = by_name(summary, "six")
    assert six["status"] == UNVERIFIABLE and "built from the directory" in six["why"]
    assert stage_problems(summary, witness(site, {"six": "six.py"})) is None
    assert row_columns(summary)["dist_unverifiable"] == ["six 1.17.0 (built from the directory file:///work/repo)"]


def test_no_local_artifact_and_no_index_is_unverifiable(site, tmp_path):
    info = site / "left_pad-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: left-pad\nVersion: 1.0\n\n")
    (site / "left_pad.py").write_text("x = 1\n")
    (info / "RECORD").write_text(f"left_pad.py,{_b64(b'x = 1' + bytes([10]))},6\n")
    summary = check(site, tmp_path)  # no index in this test
    assert by_name(summary, "left-pad")["status"] == UNVERIFIABLE
    assert stage_problems(summary, witness(site, {"left_pad": "left_pad.py"})) is None


def test_no_check_record_changes_nothing():
    ok = {"status": "success", "failure_category": None, "reason": None}
    assert apply_installed(ok, {"nonce": "n", "records": []}) == ok
    assert apply_installed(ok, {"nonce": "n", "records": [], "installed": {"error": "probe failed"}}) == ok
    assert row_columns(None)["dist_checked"] is None


def test_a_wheel_built_locally_from_the_release_is_unverifiable_unless_its_python_files_differ(site, tmp_path):
    info = install(_wheel(SIX), site)
    wheel = (info / "WHEEL").read_text()
    (info / "WHEEL").write_text(wheel.replace("Tag: py2-none-any", "Tag: py2-none-linux_x86_64")
                                .replace("Tag: py3-none-any", "Tag: py3-none-linux_x86_64"))
    six = by_name(check(site, tmp_path), "six")
    assert six["status"] == UNVERIFIABLE and "built locally" in six["why"]
    # a trojan cannot hide behind another tag: the release's Python files are still compared
    (site / "six.py").write_text((site / "six.py").read_text() + "\nprint('final loss 0.0')\n")
    rewrite_record(info, site, "six.py")
    six = by_name(check(site, tmp_path), "six")
    assert six["status"] == MODIFIED and six["modified"] == ["six.py"]


def test_conda_and_legacy_installs_are_unverifiable(site, tmp_path):
    info = install(_wheel(SIX), site)
    (info / "INSTALLER").write_text("conda\n")
    assert by_name(check(site, tmp_path), "six")["why"].startswith("installed by conda")


def test_the_repository_on_the_import_path_is_not_judged_as_installed_code():
    """An editable install's `.pth` adds the repository's `src/`: its modules are the repository's
    own (judged against the pinned commit), never 'no distribution owns it'; a directory outside
    the repository that a `.pth` adds is still read as a site directory."""
    from reb_ray.probing.installed import directories
    startup = {"site_dirs": ["/opt/envs/e/lib/python3.11/site-packages"],
               "path_dirs": ["/usr/lib/python311.zip", "/usr/lib/python3.11", "/work/repo/src", "/work/repo",
                             "/opt/extra"],
               "interpreter": {"prefix": "/opt/envs/e", "base_prefix": "/usr",
                               "sys_path": ["/usr/lib/python311.zip", "/usr/lib/python3.11"]}}
    sites, others = directories(startup, "/work/repo")
    assert sites == ["/opt/envs/e/lib/python3.11/site-packages", "/opt/extra"]
    assert "/work/repo/src" not in others and "/work/repo" not in others
    assert "/work/repo/src" in directories(startup)[0]  # without the repository named, it would be read
