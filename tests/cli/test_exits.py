"""Exit codes a script can trust (reb_ray.cli.exits): 0 only when every trial of the run was
done, 3 with a last line counting what was left undone, 1 for a failed check, 2 for usage."""

from __future__ import annotations

import json
import re
from pathlib import Path

from reb_ray.cli import exits
from reb_ray.cli.sweep import sweep_exit
from reb_ray.sweep.run import SweepResult
from tests.cli.in_process import run_cli

ROOT = Path(__file__).resolve().parents[2]


def test_every_code_means_one_thing():
    assert (exits.exit_code(), exits.exit_code(undone=2), exits.exit_code(failed=1), exits.exit_code(failed=1, undone=5)) \
        == (0, 3, 1, 1)
    assert exits.incomplete_line({"infrastructure error": 0}) is None
    assert exits.incomplete_line({"infrastructure error": 2, "hardware error": 0, "not launched: budget reached": 1}) \
        == "incomplete: 3 trial(s) left undone (2 infrastructure error, 1 not launched: budget reached); exit code 3"


def test_a_head_lost_mid_sweep_is_the_same_incomplete_code():
    from reb_ray.orchestrators.head_watch import HEAD_LOST_EXIT

    assert HEAD_LOST_EXIT == exits.INCOMPLETE


def test_a_sweep_is_done_only_when_every_trial_scored_in_the_end():
    # A retried attempt that then scored leaves nothing undone: only infra attempts were counted.
    retried = SweepResult("s", attempts=3, scored=2, infra_errors=1)
    assert sweep_exit(retried) == (0, None)
    storm = SweepResult("s", attempts=4, scored=1, infra_errors=3, unscored={"infra": 2, "hardware": 1}, not_launched=1)
    code, line = sweep_exit(storm)
    assert code == 3
    assert line == ("incomplete: 4 trial(s) left undone (2 infrastructure error, 1 hardware error, "
                    "1 not launched: budget reached); exit code 3")
    assert sweep_exit(SweepResult("s", scored=1), not_verified=1) == (
        3, "incomplete: 1 trial(s) left undone (1 export not verified); exit code 3")


def test_help_and_the_docs_carry_the_same_table():
    shown = run_cli("--help")
    assert shown.returncode == 0
    text = " ".join(shown.stdout.split())
    doc = (ROOT / "docs" / "exit-codes.md").read_text()
    for code in (exits.OK, exits.FAILED, exits.USAGE, exits.INCOMPLETE, exits.INTERRUPTED):
        assert re.search(rf"(^|\s){code}\s", text), (code, text[-600:])
        assert re.search(rf"^\| {code} \|", doc, re.M), code
    assert "docs/exit-codes.md" in text


def test_a_usage_error_is_typers_code():
    res = run_cli("tasks", "verify", "--no-such-option")
    assert res.returncode == exits.USAGE and res.stderr.count("\n") == 1, res.stderr


def test_a_sweep_whose_trials_all_failed_for_the_hardware_exits_3_and_counts_them(ray_local, tmp_path):
    """Real Ray and the real trial path (the sleeping sandbox): a trial that needs more CPUs than
    any node has is recorded as a hardware failure, never scored; before, the sweep exited 0."""
    script = tmp_path / "sleep.json"
    script.write_text(json.dumps({"default": {"agent_s": 0, "probe_s": 0}}))
    res = run_cli("sweep", "--sandbox", "sleep", "--agents", "noop", "--tasks", "numpy-trainer,pyproject-extra",
                  "--cpus-per-trial", "512", "--output", str(tmp_path / "runs"), "--quiet",
                  env={"REB_RAY_SLEEP_SCRIPT": str(script)})
    assert res.returncode == 3, res.stdout + res.stderr
    assert res.stdout.splitlines()[-1] == "incomplete: 2 trial(s) left undone (2 hardware error); exit code 3", res.stdout
