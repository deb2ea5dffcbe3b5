"""`conform`: a probe record's known fields of their type or absent; nothing else changed."""

from __future__ import annotations

from reb_ray.grading.c0 import grade_c0
from reb_ray.grading.c2 import grade_c2
from reb_ray.grading.record_types import PROBE_RECORD_INVALID, conform

SHAPE = {"count": int, "ok": bool, "names": [str], "sub": {"line": int}, "ratio": (int, float)}


def test_wrong_types_are_dropped_and_the_rest_kept():
    raw = {"count": True, "ok": 1, "names": ["a", 2, None, "b"], "sub": {"line": "3", "x": 1}, "ratio": 2,
           "stray": {"anything": [1]}}
    assert conform(raw, SHAPE) == {"names": ["a", None, "b"], "sub": {"x": 1}, "ratio": 2, "stray": {"anything": [1]}}
    assert conform({"count": None, "sub": [1]}, SHAPE) == {"count": None}  # null is unknown, never a misfit


def test_an_int_no_column_can_hold_is_dropped():
    """A record written in the agent's environment may plant 2**63: the row's int64 column cannot
    hold it, so it is unknown, never a failed write."""
    assert conform({"count": 2**63, "ratio": -(2**63) - 1, "names": [], "sub": {"x": 2**63 - 1}}, SHAPE) == \
        {"names": [], "sub": {"x": 2**63 - 1}}
    assert grade_c2({"device_count": 2**63})["c2_device_count"] is None


def test_a_c0_record_with_a_planted_field_grades_as_the_agents_failure_not_a_crash():
    raw = {"python_ok": True, "pyright": {"generalDiagnostics": []}, "search_paths": ["/sp"],
           "interpreter_site_packages": ["/sp"], "guarded_imports": [["only-one-field"]]}
    result = grade_c0(raw, 7)
    assert (result["c0_status"], result["failure_category"], result["c0_missing"]) == ("failure", PROBE_RECORD_INVALID, 7)
    assert "malformed: ValueError" in result["reason"]
