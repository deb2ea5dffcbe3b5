"""scripts/compare_test_times.py on two small JUnit reports written here: tests are matched by file
and name, then by a name unique on both sides (a moved or renamed file), never by a name that
two files share; the matched tests' ratio stands on its own line; a missing report is one line
and exit 2."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "compare_test_times.py"
_spec = importlib.util.spec_from_file_location("compare_test_times", SCRIPT)
times = importlib.util.module_from_spec(_spec)
sys.modules["compare_test_times"] = times  # dataclasses resolve their module by name
_spec.loader.exec_module(times)


def _report(path: Path, cases: list[tuple[str, str, float, bool]]) -> Path:
    body = "".join(f'<testcase classname="{module}" name="{name}" time="{s}">'
                   + ("" if ok else '<failure message="x"/>') + "</testcase>" for module, name, s, ok in cases)
    path.write_text(f'<?xml version="1.0"?><testsuites><testsuite name="pytest">{body}</testsuite></testsuites>')
    return path


EARLIER = [("tests.test_trial", "test_a[docker]", 10.0, True),
           ("tests.test_sweep", "test_b", 5.0, True),             # its file moves into a package
           ("tests.test_old", "test_c", 3.0, True),               # its file is renamed
           ("tests.test_gone", "test_d", 2.0, True),              # removed
           ("tests.test_p", "test_same", 1.0, True),              # a name two files share...
           ("tests.test_q", "test_same", 1.0, True)]
LATER = [("tests.test_trial", "test_a[docker]", 12.0, True),
         ("tests.sweep.test_sweep", "test_b", 6.0, False),
         ("tests.test_new", "test_c", 4.0, True),
         ("tests.test_z", "test_e", 20.0, True),                 # a new subject
         ("tests.test_r", "test_same", 1.0, True),               # ...and two other files share later
         ("tests.test_s", "test_same", 1.0, True)]


def test_matched_moved_renamed_new_and_removed_tests(tmp_path):
    comparison = times.match(times.read_cases(_report(tmp_path / "a.xml", EARLIER)),
                             times.read_cases(_report(tmp_path / "b.xml", LATER)))
    pairs = {(old.module, new.module, new.name) for old, new in comparison.both}
    assert pairs == {("tests.test_trial", "tests.test_trial", "test_a[docker]"),
                     ("tests.test_sweep", "tests.sweep.test_sweep", "test_b"),
                     ("tests.test_old", "tests.test_new", "test_c")}
    assert sorted(c.module for c in comparison.only_later) == ["tests.test_r", "tests.test_s", "tests.test_z"]
    assert sorted(c.module for c in comparison.only_earlier) == ["tests.test_gone", "tests.test_p", "tests.test_q"]
    lines = times.render(comparison).splitlines()
    assert lines[0] == "in both runs: 3 tests, 18 s earlier, 22 s later (1 failed in one of the runs)"
    assert lines[1] == "1.22"  # 22 / 18
    assert lines[2] == "only in the later run: 3 tests, 22 s"
    assert lines[3] == "only in the earlier run: 3 tests, 4 s"
    assert lines[4].split() == ["20", "s", "tests.test_z"]  # the file that adds the most first
    slower = lines[lines.index("most slower in the later run:") + 1:]
    assert [line.split()[-1] for line in slower] == ["tests.test_trial::test_a[docker]",
                                                      "tests.sweep.test_sweep::test_b", "tests.test_new::test_c"]


def test_the_command_prints_the_comparison_and_a_missing_report_is_one_line(tmp_path):
    a, b = _report(tmp_path / "a.xml", EARLIER), _report(tmp_path / "b.xml", LATER)
    done = subprocess.run([sys.executable, str(SCRIPT), str(a), str(b), "--top", "1"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.splitlines()[1] == "1.22", done.stderr
    missing = subprocess.run([sys.executable, str(SCRIPT), str(a), str(tmp_path / "none.xml")],
                             capture_output=True, text=True)
    assert missing.returncode == 2 and missing.stderr.strip() == f"compare_test_times: {tmp_path / 'none.xml'}: no such JUnit report"
