"""The suite's per-file time budgets (tests/helpers/budget.py): every budget names a test file that
exists, and a serial run that goes over one fails with the file and its budget named."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.budget import BUDGETS, DEFAULT_S, GRACE_S, TOTAL, busy_core_seconds, load_budgets, over_budget

ROOT = Path(__file__).resolve().parents[1]


def test_every_budget_names_a_test_file_that_exists():
    budgets = load_budgets()
    assert budgets[TOTAL] > 0
    missing = [name for name in budgets if name != TOTAL and not (ROOT / "tests" / name).is_file()]
    assert missing == [], f"budgets for files that no longer exist (remove them from {BUDGETS.name}): {missing}"


def test_over_budget_names_each_file_past_its_own_or_the_default_budget_and_its_grace():
    budgets = {"a.py": 10.0, TOTAL: 100.0}
    seconds = {"a.py": 10.0 + GRACE_S + 0.5, "b.py": DEFAULT_S + GRACE_S - 1,
               "c.py": DEFAULT_S + GRACE_S + 1, TOTAL: 22.0}
    assert over_budget(seconds, budgets) == [("c.py", DEFAULT_S + GRACE_S + 1, DEFAULT_S),
                                             ("a.py", 10.0 + GRACE_S + 0.5, 10.0)]
    assert over_budget({"a.py": 10.0 + GRACE_S}, budgets) == []  # the budget plus its grace is within it
    assert over_budget({"a.py": 10.5}, budgets) == []  # a few seconds of a slow day are noise


def test_the_total_has_no_grace():
    assert over_budget({TOTAL: 100.5}, {TOTAL: 100.0}) == [(TOTAL, 100.5, 100.0)]


@pytest.mark.parametrize("text, says", [("[1, 2]", "not a JSON object"), ('{"a.py": -3}', "'a.py': -3"),
                                        ('{"a.py": "ten"}', "'a.py': 'ten'"), ("{", "not a JSON object")])
def test_a_malformed_budgets_file_is_one_clear_error(tmp_path, text, says):
    path = tmp_path / "budgets.json"
    path.write_text(text)
    with pytest.raises(pytest.UsageError, match="budgets.json") as caught:
        load_budgets(path)
    assert says in str(caught.value)


def test_a_serial_run_over_a_budget_fails_naming_the_file_and_the_budget(tmp_path, slow_process):
    """A child pytest (the budget plugin loaded, rooted in a temporary directory) whose sleeping
    test goes past its file's budget of 0.2 s: the run fails although the tests passed. Its
    summary of the busiest files puts the file that kept a core busy for 0.6 s above the one that
    slept."""
    (tmp_path / "test_sleepy.py").write_text("import time\n\ndef test_sleeps():\n    time.sleep(0.5)\n")
    (tmp_path / "test_spins.py").write_text(
        "import time\n\ndef test_spins():\n    end = time.process_time() + 0.6\n"
        "    while time.process_time() < end:\n        pass\n")
    budgets = tmp_path / "budgets.json"
    budgets.write_text(json.dumps({"test_sleepy.py": 0.2, TOTAL: 3600}))
    run = subprocess.run(
        [sys.executable, "-c",
         "import sys, pathlib, pytest, tests.helpers.budget as b; b.BUDGETS = pathlib.Path(sys.argv[1]); b.GRACE_S = 0.0; "
         "sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', '-p', 'tests.helpers.budget', "
         "'--rootdir', sys.argv[2], sys.argv[2]]))", str(budgets), str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    out = run.stdout + run.stderr
    assert "2 passed" in out, out[-2000:]
    assert run.returncode == 1, out[-2000:]
    busiest = re.findall(r"^\s*([\d.]+) core-s\s+[\d.]+ s  tests/(\S+)$", out, re.M)
    assert [name for _, name in busiest] == ["test_spins.py", "test_sleepy.py"], out[-2000:]
    assert float(busiest[0][0]) >= 0.5, out[-2000:]
    assert re.search(r"over budget: tests/test_sleepy\.py took 0\.[5-9] s, budget 0\.2 s", out), out[-2000:]


def test_busy_core_seconds_leave_idle_and_iowait_out():
    stat = ("cpu  100 20 30 4000 500 6 7 8 0 0\n"
            "cpu0 50 10 15 2000 250 3 3 4 0 0\nintr 1 2 3\n")
    assert busy_core_seconds(stat, 100) == pytest.approx((100 + 20 + 30 + 6 + 7 + 8) / 100)
    with pytest.raises(ValueError, match="all-cores line"):
        busy_core_seconds("intr 1 2 3\n", 100)
