"""Preparing NexAU's part: which Python is usable, what of it is copied, the lock's pins."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reb_ray.agents.toolchain_nexau import _ignore_in_prefix, check_source, find_python, lock_constraints, probe_python
from reb_ray.errors import RebRayError


def fake_python(tmp_path: Path, version: list[int], prefix: str) -> Path:
    """An executable that answers the probe the way an interpreter at `prefix` would."""
    exe = tmp_path / "python-fake"
    exe.write_text(f"#!/bin/sh\necho '{json.dumps({'version': version, 'prefix': prefix, 'ldlibrary': 'x'})}'\n")
    exe.chmod(0o755)
    return exe


def test_an_old_or_system_python_is_refused_in_one_line(tmp_path):
    with pytest.raises(RebRayError, match=r"Python 3\.11\.\d+; NexAU needs >= 3\.12"):
        probe_python(Path("/usr/bin/python3"))  # the image's and Debian 12's python
    with pytest.raises(RebRayError, match="its prefix /usr is not a self-contained installation"):
        probe_python(fake_python(tmp_path, [3, 12, 4], "/usr"))
    with pytest.raises(RebRayError, match="does not run as a Python"):
        probe_python(tmp_path / "missing")


def test_a_self_contained_prefix_is_accepted(tmp_path):
    prefix = tmp_path / "py"
    (prefix / "lib" / "python3.12").mkdir(parents=True)
    (prefix / "lib" / "python3.12" / "os.py").write_text("")
    found = find_python(fake_python(tmp_path, [3, 12, 4], str(prefix)))
    assert (found.version, found.prefix) == ("3.12", prefix)


def test_the_copy_leaves_tests_site_packages_and_the_static_library(tmp_path):
    root = tmp_path / "py"
    ignore = _ignore_in_prefix(root, "3.12")
    assert ignore(str(root / "lib" / "python3.12"), ["os.py", "test", "site-packages", "json"]) == {"test", "site-packages"}
    config = root / "lib" / "python3.12" / "config-3.12-x86_64-linux-gnu"
    assert ignore(str(config), ["libpython3.12.a", "Makefile"]) == {"libpython3.12.a"}
    assert ignore(str(root / "lib"), ["libpython3.12.so.1.0", "python3.12"]) == set()


def test_the_lock_pins_registry_packages_only(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "nexau"\nversion = "0.4.1"\n')
    (tmp_path / "uv.lock").write_text(
        'version = 1\n[[package]]\nname = "ag-ui-protocol"\nversion = "0.1.10"\nsource = { registry = "https://pypi.org/simple" }\n'
        '[[package]]\nname = "nexau"\nversion = "0.4.1"\nsource = { editable = "." }\n')
    assert check_source(tmp_path)["version"] == "0.4.1"
    assert lock_constraints(tmp_path) == "ag-ui-protocol==0.1.10\n"
    assert lock_constraints(tmp_path / "none") == ""
    with pytest.raises(RebRayError, match="cannot read pyproject.toml"):
        check_source(tmp_path / "none")
