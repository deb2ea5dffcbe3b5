"""Property-based fuzzing of report.json, the file an agent controls and the harness parses.

Property: parse_report never raises; it returns ("ok", Report), ("missing_report", None) or
("invalid_report", None) with one printable line of bounded length. An "ok" report has a usable
python_path and keeps the object as written; informational keys never make it invalid.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reb_ray.models.report import INFORMATIONAL, MAX_REPORT_BYTES, REASON_CHARS, Report, contract_faults, parse_report

GOOD = {"python_path": "/usr/bin/python3", "python_version": "3.11.2", "torch_version": None,
        "cuda_available": None, "gpu_count": None, "ddp_expected_ok": None, "env_tool": "system",
        "env_name": None, "notes": None}
KEYS = list(GOOD)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=50),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20)
odd_paths = st.sampled_from(["/proc/self/exe", "/proc/self/fd/0", "/usr/bin/python3\x00", "/a\nb", "/a\r\x1b[2J",
                             "/" + "p" * 5000, "", " ", "../../etc/shadow", "\u202e/nohtyp"])
SETTINGS = settings(max_examples=75, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check_report(data: bytes | None) -> tuple[str, Report | None, str | None]:
    status, report, reason = parse_report(data)
    assert status in ("ok", "missing_report", "invalid_report")
    if status == "ok":
        assert isinstance(report, Report) and reason is None
        assert isinstance(report.python_path, str) and report.python_path.startswith("/")
        assert all(ord(ch) >= 32 and ord(ch) != 127 for ch in report.python_path)
        assert report.written["python_path"] == report.python_path
        faults = contract_faults(report.written)
        assert {f["key"] for f in faults} <= set(INFORMATIONAL)
        assert all(isinstance(f["fault"], str) and f["fault"] for f in faults)
    else:
        assert report is None and isinstance(reason, str)
        assert "\n" not in reason and "\r" not in reason and reason.isprintable(), reason
        assert len(reason) <= REASON_CHARS
    return status, report, reason


@SETTINGS
@given(st.binary(max_size=2000))
def test_any_bytes(data: bytes) -> None:
    check_report(data)


@SETTINGS
@given(st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=8), json_values, max_size=12))
def test_wrong_types(fields: dict) -> None:
    check_report(json.dumps({**GOOD, **fields}).encode())


@SETTINGS
@given(odd_paths, st.sampled_from([b"", b"\xef\xbb\xbf", b"\xff\xfe"]))
def test_odd_python_path(path: str, prefix: bytes) -> None:
    status, _, _ = check_report(prefix + json.dumps({**GOOD, "python_path": path}).encode())
    if any(ord(ch) < 32 for ch in path) or len(path) > 4096 or not path.startswith("/"):
        assert status == "invalid_report"


@SETTINGS
@given(json_values)
def test_non_object_top_level(value: object) -> None:
    if not isinstance(value, dict):
        status, _, reason = check_report(json.dumps(value).encode())
        assert status == "invalid_report" and "object" in reason


def test_deep_nesting_is_invalid_not_recursion_error() -> None:
    assert check_report(b"[" * 100_000 + b"]" * 100_000)[0] == "invalid_report"
    deep_extra = b'{"python_path": "/usr/bin/python3", "env_tool": "x", "deep": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    assert check_report(deep_extra)[0] == "invalid_report"


def test_huge_int_and_nan() -> None:
    assert check_report(b'{"gpu_count": ' + b"9" * 5000 + b"}")[0] == "invalid_report"  # not parseable JSON
    assert check_report(json.dumps({**GOOD, "gpu_count": 10**400}).encode())[0] == "ok"  # a valid int, just big
    # A NaN or an infinity in an informational key is a wrong type: a fault, not an invalid report.
    for key, value in (("gpu_count", float("nan")), ("python_version", float("inf"))):
        status, report, _ = check_report(json.dumps({**GOOD, key: value}).encode())
        assert status == "ok" and [f["key"] for f in report.faults()] == [key]


def test_huge_string_is_too_large() -> None:
    status, _, reason = check_report(json.dumps({**GOOD, "notes": "x" * (20 << 20)}).encode())
    assert status == "invalid_report" and reason.startswith("too large")
    assert check_report(json.dumps({**GOOD, "notes": "x" * (MAX_REPORT_BYTES // 2)}).encode())[0] == "ok"


def test_reason_is_one_line_for_a_long_bad_key() -> None:
    status, _, reason = check_report(json.dumps({**GOOD, "python_path": "/x\n\x1b[31m" * 10_000}).encode())
    assert status == "invalid_report"


def test_duplicate_keys_last_wins_and_non_utf8_is_replaced() -> None:
    assert check_report(b'{"python_path": "\\n", "python_path": "/usr/bin/python3", "env_tool": "x", "python_version": null,'
                 b' "torch_version": null, "cuda_available": null, "gpu_count": null, "ddp_expected_ok": null,'
                 b' "env_name": null, "notes": "\xff\xfe"}')[0] == "ok"
    assert check_report(None) == ("missing_report", None, "report file not written")
