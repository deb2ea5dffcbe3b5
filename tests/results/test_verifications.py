"""The verifications dataset: appended records read back in order, a torn line skipped."""

from __future__ import annotations

from reb_ray.results.verifications import VERIFICATIONS, append_verification, attempt_key, read_verifications


def test_records_come_back_in_order_and_a_torn_line_is_skipped(tmp_path):
    assert read_verifications(tmp_path) is None  # no dataset: not the same as an empty one
    append_verification(tmp_path, {"sweep_id": "s", "trial_id": "a/t/0", "attempt": 1, "verdict": "reproducible: yes"})
    with open(tmp_path / VERIFICATIONS, "a") as f:
        f.write('{"sweep_id": "s", "trial_id": "a/t/0", "att')  # a kill mid-append
        f.write("\n[1, 2]\n")  # JSON, but no record
    append_verification(tmp_path, {"sweep_id": "s", "trial_id": "a/t/0", "attempt": "2", "build_s": 1.5,
                                   "when": tmp_path})  # a value JSON cannot hold is written as text
    records = read_verifications(tmp_path)
    assert [r["verdict"] if "verdict" in r else r["build_s"] for r in records] == ["reproducible: yes", 1.5]
    assert records[1]["when"] == str(tmp_path)
    assert [attempt_key(r) for r in records] == [("s", "a/t/0", 1), ("s", "a/t/0", 2)]
    assert attempt_key({"attempt": "x"}) == (None, None, "x")
