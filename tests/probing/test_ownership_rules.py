"""probes/ownership.py on real files in a temporary directory (no sandbox needed: stdlib only)."""

from __future__ import annotations

import base64
import hashlib
import importlib.util

from reb_ray.paths import bundled_dir

_spec = importlib.util.spec_from_file_location("reb_ray_ownership", bundled_dir("probes") / "ownership.py")
ownership = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ownership)


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


A_PY = b"x = 1\n"


def test_native_modules_namespaces_and_hashes(tmp_path):
    site, repo = tmp_path / "site-packages", tmp_path / "repo"
    (site / "fast-1.0.dist-info").mkdir(parents=True)
    repo.mkdir()
    native = b"\x7fELF fake extension bytes"
    (site / "fast.cpython-311-x86_64-linux-gnu.so").write_bytes(native)
    (site / "handmade.cpython-311-x86_64-linux-gnu.so").write_bytes(native)
    (site / "ns" / "owned").mkdir(parents=True)
    (site / "ns" / "owned" / "a.py").write_text("x = 1\n")
    (site / "loose" / "sub").mkdir(parents=True)
    (site / "loose" / "sub" / "b.py").write_text("y = 1\n")
    (site / "fast-1.0.dist-info" / "RECORD").write_text(
        f"fast.cpython-311-x86_64-linux-gnu.so,{_record_hash(native)},{len(native)}\n"
        f"ns/owned/a.py,{_record_hash(A_PY)},6\nfast-1.0.dist-info/RECORD,,\n")
    manifests = ownership.Manifests([str(site)])
    owners = {name: ownership.resolve_owner(name, str(repo), [str(repo)], {"os"}, [str(site)], manifests)
              for name in ("fast", "handmade", "ns", "loose", "os", "nowhere")}
    assert {n: o["owner"] for n, o in owners.items()} == {
        "fast": "distribution", "handmade": "unowned", "ns": "distribution", "loose": "unowned", "os": "stdlib",
        "nowhere": "unlocated"}
    assert owners["fast"]["name"] == "fast-1.0" and owners["ns"]["path"].endswith("ns/owned/a.py")
    (site / "fast.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF patched")
    assert ownership.Manifests([str(site)]).owner(str(site / "fast.cpython-311-x86_64-linux-gnu.so"))["owner"] == "modified"


def test_stdlib_names_follow_typeshed_versions(tmp_path):
    versions = tmp_path / "VERSIONS"
    versions.write_text("# comment\nos: 3.0-\ndistutils: 3.0-3.11\ntomllib: 3.11-\nasyncio.mixins: 3.10-\n")
    assert ownership.stdlib_names(str(versions), [3, 11, 2]) == {"os", "distutils", "tomllib"}
    assert ownership.stdlib_names(str(versions), [3, 12, 0]) == {"os", "tomllib"}
    assert ownership.stdlib_names(str(versions), [3, 10, 0]) == {"os", "distutils"}
