"""The installed-code check on namespace packages that several distributions share.

multimodalmamba's honest reference environment holds `google/` (protobuf and
googleapis-common-protos) and `opentelemetry/` (eight opentelemetry-* distributions, pulled in
by swarms). The probe hashes every file below a distribution's top-level entries, so before the
fix each of them counted the others' files as code added into its package: every one was
`modified`, and a stage that imported `google` failed as `dist_modified`. The environments here
are real published wheels unpacked as pip does (the node's wheel directories); a file planted
into the shared directory is still found.
"""

from __future__ import annotations

from pathlib import Path

from reb_ray.grading.installed import (DIST_MODIFIED, MODIFIED, UNMATCHED, UNOWNED_MODULE, VERIFIED, own_files,
                                       row_columns, stage_problems)
from tests.grading.test_installed import SIX, _b64, _wheel, by_name, check, install, rewrite_record, site, witness  # noqa: F401

PROTOBUF = "protobuf-7.36.2-cp310-abi3-manylinux2014_x86_64.whl"
GOOGLEAPIS = "googleapis_common_protos-1.75.5-py3-none-any.whl"
OTEL = ["opentelemetry_api-1.45.0-py3-none-any.whl", "opentelemetry_sdk-1.45.0-py3-none-any.whl",
        "opentelemetry_proto-1.45.0-py3-none-any.whl", "opentelemetry_exporter_otlp_proto_common-1.45.0-py3-none-any.whl",
        "opentelemetry_exporter_otlp_proto_http-1.45.0-py3-none-any.whl"]
OK = {"status": "success", "failure_category": None, "reason": None}


def _google(site: Path) -> tuple[Path, Path]:
    return install(_wheel(PROTOBUF), site), install(_wheel(GOOGLEAPIS), site)


def test_distributions_sharing_a_namespace_package_are_each_verified(site, tmp_path):
    _google(site)
    for name in OTEL:
        install(_wheel(name), site)
    summary = check(site, tmp_path)
    assert {d["name"]: d["status"] for d in summary["dists"]} == {
        "protobuf": VERIFIED, "googleapis-common-protos": VERIFIED, "opentelemetry-api": VERIFIED,
        "opentelemetry-sdk": VERIFIED, "opentelemetry-proto": VERIFIED,
        "opentelemetry-exporter-otlp-proto-common": VERIFIED, "opentelemetry-exporter-otlp-proto-http": VERIFIED}
    used = witness(site, {"google": "google/protobuf/__init__.py", "opentelemetry": "opentelemetry/sdk/__init__.py"})
    assert stage_problems(summary, used) is None
    assert row_columns(summary)["dist_modified"] == [] and summary["loose"] == []


def test_a_file_planted_in_the_shared_directory_is_still_found(site, tmp_path):
    _google(site)
    (site / "google" / "protobuf" / "zz_hook.py").write_text("print('final loss 0.0')\n")
    summary = check(site, tmp_path)
    # listed by no RECORD: code added into both distributions' packages
    assert by_name(summary, "protobuf")["status"] == MODIFIED
    assert "google/protobuf/zz_hook.py" in by_name(summary, "protobuf")["added"]
    found = stage_problems(summary, witness(site, {"google": "google/protobuf/__init__.py"}))
    assert found is not None and found[0] == DIST_MODIFIED


def test_a_planted_file_listed_in_the_other_distributions_record_makes_that_one_modified(site, tmp_path):
    _, googleapis = _google(site)
    (site / "google" / "protobuf" / "zz_hook.py").write_text("print('final loss 0.0')\n")
    rewrite_record(googleapis, site, "google/protobuf/zz_hook.py")
    summary = check(site, tmp_path)
    assert by_name(summary, "protobuf")["status"] == VERIFIED
    assert by_name(summary, "googleapis-common-protos")["status"] == MODIFIED
    assert by_name(summary, "googleapis-common-protos")["added"] == ["google/protobuf/zz_hook.py"]
    found = stage_problems(summary, witness(site, {"google": "google/protobuf/__init__.py"}))
    assert found is not None and found[0] == DIST_MODIFIED and "googleapis-common-protos" in found[1]


def test_a_planted_file_claimed_by_a_hand_made_dist_info_is_unowned(site, tmp_path):
    """The forger writes a dist-info of a real release (six 1.17.0, whose wheel the node has)
    whose RECORD lists only the planted file: none of six's published files is installed, so it
    matches nothing, and `google` is then owned by an unmatched distribution too."""
    _wheel(SIX)
    _google(site)
    (site / "google" / "protobuf" / "zz_hook.py").write_text("print('final loss 0.0')\n")
    info = site / "six-1.17.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: six\nVersion: 1.17.0\n\n")
    (info / "WHEEL").write_text("Wheel-Version: 1.0\nTag: py3-none-any\n")
    (info / "RECORD").write_text(f"google/protobuf/zz_hook.py,{_b64((site / 'google/protobuf/zz_hook.py').read_bytes())},24\n")
    summary = check(site, tmp_path)
    assert by_name(summary, "protobuf")["status"] == VERIFIED
    assert by_name(summary, "six")["status"] == UNMATCHED
    found = stage_problems(summary, witness(site, {"google": "google/protobuf/__init__.py"}))
    assert found is not None and found[0] == UNOWNED_MODULE


def test_own_files_is_a_pure_idempotent_rule():
    listing = {"dists": [
        {"dir": "/s", "record": ["ns/a.py", "a-1.dist-info/RECORD"], "files": {"ns/a.py": "h1", "ns/b.py": "h2", "ns/c.py": "h3"}},
        {"dir": "/s", "record": ["ns/b.py"], "files": {"ns/a.py": "h1", "ns/b.py": "h2", "ns/c.py": "h3"}},
        {"dir": "/t", "record": ["ns/a.py"], "files": {"ns/b.py": "h2"}}]}
    once = own_files(listing)
    assert [d["files"] for d in once["dists"]] == [{"ns/a.py": "h1", "ns/c.py": "h3"}, {"ns/b.py": "h2", "ns/c.py": "h3"},
                                                   {"ns/b.py": "h2"}]  # another directory's RECORD never counts
    assert own_files(once) == once and listing["dists"][0]["files"]["ns/b.py"] == "h2"
    assert own_files(None) is None and own_files({"error": "x"}) == {"error": "x"}


MYSQL = "mysql_connector_python-26.7.0-cp311-cp311-manylinux_2_28_x86_64.whl"


def test_a_repaired_wheel_whose_wheel_file_says_linux_is_verified_against_its_manylinux_artifact(site, tmp_path):
    """kyegomez--visionmamba's torchvision 0.16.2 from PyPI was `unverifiable` ("built locally")
    because its WHEEL says cp311-cp311-linux_x86_64 under a manylinux file name, as this real
    wheel's does; every file is the artifact's, so it is verified. A file that differs still
    does not verify: it is judged as a local build (its Python files against the release's)."""
    wheel = _wheel(MYSQL)
    info = install(wheel, site)
    assert "Tag: cp311-cp311-linux_x86_64" in (info / "WHEEL").read_text()
    mysql = by_name(check(site, tmp_path), "mysql-connector-python")
    assert mysql["status"] == VERIFIED and mysql["source"].startswith(MYSQL)
    so = next(p for p in sorted(site.rglob("*.so")))
    so.write_bytes(so.read_bytes() + b"\0")
    assert by_name(check(site, tmp_path), "mysql-connector-python")["status"] == "unverifiable"
    py = next(p for p in sorted((site / "mysql").rglob("*.py")) if p.stat().st_size > 100)
    py.write_text(py.read_text() + "\nprint('final loss 0.0')\n")
    assert by_name(check(site, tmp_path), "mysql-connector-python")["status"] == MODIFIED
