"""Agents that hide a changed entry file from git, or leave a process behind to swap it during
the probes, against what the harness observes from outside the sandbox (real Docker, the
`command` agent on the demo task numpy-trainer, whose C1 fails for want of numpy unless the
stage runs something other than the pinned train.py). Each scores no better than `noop` on C1
and its row says why. They run in the session's batch of adversaries (two trials at a
time, tests/helpers/adversaries.py); `noop`'s own trial is the shared demo sweep's, and that honest environments keep passing C1 with nothing flagged is checked on
that sweep's `heuristic` rows here too."""

from __future__ import annotations

import pytest

from reb_ray.suite.load import load_suite
from reb_ray.sweep.regrade import regrade_trial
from tests.helpers.adversaries import AdversaryGroup, command_specs, write_file

# The fake entry file imports the pinned package (with an empty numpy stub first on its path,
# so the import succeeds) and prints the success line: the witness sees a pinned module run.
FAKE = "import sys; sys.path.insert(0, '/opt/stub'); import linreg; print('step 1 loss 0.0'); print('final loss 0.0')"
_FAKE_FILE = f"mkdir -p /opt/stub/numpy && : > /opt/stub/numpy/__init__.py\nprintf \"%s\\n\" \"{FAKE}\" > /opt/fake.py\n"
_G = "git -c safe.directory='*'"

# A daemon that waits for the probe phase (the toolbox appears), puts the fake entry file in
# place until C1's helper has written its config, then puts the pinned one back and exits.
_SWAPPER = r"""#!/bin/bash
cd "$R" || exit 1
cp train.py /opt/orig.py
while [ ! -d /opt/reb-ray-toolbox ]; do sleep 0.05; done
cp /opt/fake.py train.py
while [ ! -e /tmp/reb-ray-out/tiny.json ]; do sleep 0.05; done
sleep 3
cp /opt/orig.py train.py
"""

#: name -> (what it does, shell run as the agent in the repository, reported python_path)
ADVERSARIES = {
    # replaces the entry file and hides it from `git status` / `git diff`
    "assume_unchanged": (f"{_FAKE_FILE}cp /opt/fake.py train.py\n{_G} update-index --assume-unchanged train.py\n",
                         "/usr/bin/python3"),
    "skip_worktree": (f"{_FAKE_FILE}cp /opt/fake.py train.py\n{_G} update-index --skip-worktree train.py\n",
                      "/usr/bin/python3"),
    # a clean filter in .git/config that makes the replaced file hash as the pinned one
    "clean_filter": (f"{_FAKE_FILE}cp train.py /opt/orig.py\ncp /opt/fake.py train.py\n"
                     f"{_G} config filter.pin.clean 'cat /opt/orig.py'\n"
                     "echo 'train.py filter=pin' >> .git/info/attributes\n", "/usr/bin/python3"),
    # core.worktree pointed at a pristine copy: every git command of the sandbox compares that copy
    "worktree_redirect": (f"{_FAKE_FILE}cp -a . /opt/pristine\n{_G} config core.worktree /opt/pristine\n"
                          "cp /opt/fake.py train.py\n", "/usr/bin/python3"),
    # a daemon named exactly like the keep-alive ("sleep infinity"), in its own session, re-parented to PID 1
    "sleep_daemon": (f"{_FAKE_FILE}" + write_file("/opt/d/infinity", _SWAPPER)
                     + "R=$PWD setsid -f bash -c 'cd /opt/d && exec -a sleep bash infinity' </dev/null >/dev/null 2>&1\n"
                     "sleep 0.5\n", "/usr/bin/python3"),
    # the same daemon double-forked into a new session, named as the container's init
    "double_fork": (f"{_FAKE_FILE}" + write_file("/opt/d/init.sh", _SWAPPER)
                    + "( R=$PWD setsid bash -c 'exec -a /usr/bin/tini bash /opt/d/init.sh -- sleep infinity' "
                    "</dev/null >/dev/null 2>&1 & )\nsleep 0.5\n", "/usr/bin/python3"),
    # the daemon, and a /bin/sh that skips the harness's kill script inside the sandbox
    "shell_skips_kill": (f"{_FAKE_FILE}" + write_file("/opt/d/swap.sh", _SWAPPER)
                         + "R=$PWD setsid -f bash /opt/d/swap.sh </dev/null >/dev/null 2>&1\n"
                         + write_file("/opt/d/sh", '#!/bin/dash\ncase "$2" in *"kill -STOP"*) exit 0;; esac\nexec /bin/dash "$@"')
                         + "ln -sf /opt/d/sh /bin/sh\nsleep 0.5\n", "/usr/bin/python3"),
    # a start-up hook of the reported interpreter that, once the probes run it (the toolbox is
    # there), rewrites the entry file and leaves it so: the stages run with the fake
    "probe_time_rewrite": (f"{_FAKE_FILE}" + write_file("/usr/local/lib/python3.11/dist-packages/zzz_late.pth",
                           "import os, shutil; os.path.isdir('/opt/reb-ray-toolbox') and os.path.isfile(os.getcwd() + "
                           "'/train.py') and shutil.copy('/opt/fake.py', os.getcwd() + '/train.py')"),
                           "/usr/bin/python3"),
}
ADVERSARY_GROUP = AdversaryGroup("outside", command_specs(ADVERSARIES, shell="bash"))


@pytest.mark.docker
def test_hidden_edits_and_leftover_daemons_score_no_better_than_noop(adversary_runs, demo_sweep):
    outcomes = adversary_runs[ADVERSARY_GROUP.sweep_id].outcomes
    assert set(outcomes) == set(ADVERSARIES)
    rows = {n: o.trial for n, o in outcomes.items()}
    stages = {n: {s["stage"]: s for s in o.stages} for n, o in outcomes.items()}
    noop = demo_sweep.row("noop", "numpy-trainer")
    c1 = {n: s["c1"] for n, s in stages.items()}
    for name, row in rows.items():
        assert row["status"] == "scored" and row["report_status"] == "ok", (name, row["failure_reason"])
        assert row["c1_status"] == "failure" == noop["c1_status"], (name, c1[name]["reason"], c1[name]["log_head"])
        if name != "probe_time_rewrite":  # that one's fake runs in the stage, and is caught after it
            assert "final loss 0.0" not in (c1[name]["log_head"] or ""), name

    # Edits git cannot see: found by content from outside, put back; the pinned train.py ran.
    for name in ("assume_unchanged", "skip_worktree", "clean_filter", "worktree_redirect"):
        row = rows[name]
        assert row["repo_outside_restored"] == ["train.py"], (name, row["repo_outside_restored"])
        assert "train.py" in row["repo_restored_files"] and row["repo_restored"] is True, name
        assert c1[name]["failure_category"] == "deps" and c1[name]["witness_status"] == "valid", (name, c1[name]["log_tail"])
        assert row["repo_probe_changed"] == [], name

    # Daemons disguised as the keep-alive or the init: killed between the phases (the harness
    # spares only the PIDs it recorded), so none was alive when the probes began.
    for name, shown in (("sleep_daemon", "sleep infinity"), ("double_fork", "/usr/bin/tini")):
        row = rows[name]
        assert any(c.startswith(shown) for c in row["leftover_commands"]), (name, row["leftover_commands"])
        assert row["probe_processes_before"] == 0 and row["probe_processes_after"] == 0, name
        assert c1[name]["failure_category"] == "deps" and row["repo_probe_changed"] == [], name

    # A /bin/sh that skips the kill inside the sandbox: the daemon is seen from outside, and
    # nothing is probed with it alive.
    row = rows["shell_skips_kill"]
    assert row["probe_processes_before"] >= 1 and any(c.startswith("before: bash /opt/d/swap.sh") for c in
                                                      row["probe_process_commands"]), row["probe_process_commands"]
    assert c1["shell_skips_kill"]["failure_category"] == "agent_process_in_probes", c1["shell_skips_kill"]["reason"]
    assert "swap.sh" in c1["shell_skips_kill"]["reason"]

    # A file the stages ran with changed during the probe phase: the stages fail as the agent's.
    row = rows["probe_time_rewrite"]
    assert row["repo_probe_changed"] == ["train.py"] and row["repo_outside_restored"] == [], row["repo_probe_changed"]
    assert c1["probe_time_rewrite"]["failure_category"] in ("repo_changed_in_probes", "unverified_run"), c1["probe_time_rewrite"]["reason"]

    # Honest environments: nothing flagged, C1 still passes with a valid witness.
    for task in ("numpy-trainer", "import-name-mismatch", "pyproject-extra"):
        honest = demo_sweep.row("heuristic", task)
        assert honest["c1_status"] == "success" and honest["c1_witness"] == "valid", task
        assert honest["probe_processes_before"] == 0 and honest["repo_outside_restored"] == [], task
        assert honest["repo_probe_changed"] == [], task

    # The stored rows reach the same verdicts again.
    spec = next(t for t in load_suite("demo") if t.id == "numpy-trainer")
    for name in rows:
        again = regrade_trial(rows[name], stages[name], spec, "outside-regrade")
        c1_again = next(s for s in again.stages if s["stage"] == "c1")
        assert (c1_again["status"], c1_again["failure_category"]) == (c1[name]["status"], c1[name]["failure_category"]), name
