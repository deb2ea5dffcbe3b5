"""`reb-ray trial show` on a results directory: what it prints without artifacts, and its errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.analysis.runs import row, write_run
from tests.cli.in_process import run_cli

ROOT = Path(__file__).resolve().parents[2]


def _show(*args: str) -> subprocess.CompletedProcess:
    return run_cli("trial", "show", *args, cwd=ROOT)


def test_show_without_artifacts_falls_back_to_the_rows_output_tail(tmp_path):
    write_run(tmp_path, [
        row("a", "t1", 1, "infra_error", failure_owner="infra", failure_category="infra_llm_rate_limit",
            failure_reason="infra_llm_rate_limit: the agent wrote no usable report", llm_requests=1, llm_rate_limited=1),
        row("a", "t1", 2, "scored", agent_output_tail="step 1\nstep 2\nall done", llm_requests=2, input_tokens=10,
            output_tokens=3, cost_usd=0.00012, cost_source="price_table", agent_exit_code=0, report_status="ok"),
    ])
    res = _show(str(tmp_path), "a/t1/0")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "attempt 2 (2 recorded)" in out and "attempts 1 infra_error infra_llm_rate_limit; 2 scored" in out
    assert "input 10 (cached -, cache write -), output 3 (reasoning -)" in out and "$0.000120 (price_table" in out
    assert "commands: none recorded (no transcript stored: the agent kind - keeps none; no commands in an environment manifest)" in out
    assert "  all done" in out
    first = _show(str(tmp_path), "a/t1/0", "--attempt", "1")
    assert "status   infra_error; failure owner infra, category infra_llm_rate_limit" in first.stdout


def test_unknown_trials_and_attempts_are_one_line_errors(tmp_path):
    write_run(tmp_path, [row("a", "t1", 1, "scored"), row("a", "t1", 1, "scored", sweep="s2")])
    for args, message in ((("a/t9/0",), "error: no trial 'a/t9/0' under"), (("a/t1/0",), "is in sweeps s1, s2"),
                          (("a/t1/0", "--sweep-id", "s1", "--attempt", "4"), "has no attempt 4; it has 1")):
        res = _show(str(tmp_path), *args)
        assert res.returncode == 2 and message in res.stderr and res.stderr.count("\n") == 1, res.stderr
    res = _show(str(tmp_path / "nowhere"), "a/t1/0")
    assert res.returncode == 2 and "no trials/ dataset here" in res.stderr
