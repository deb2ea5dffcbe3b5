"""Shortcut-taking agents against the witness and the pinned repository (real Docker, the
`command` agent on the demo task numpy-trainer, in the session's batch of adversaries,
tests/helpers/adversaries.py): each scores no better than `noop` on C1, and
its row says why. `noop`'s own trial is the shared demo sweep's (tests/helpers/shared_runs.py).
That honest environments (the `heuristic` baseline) still pass C1 with a valid
witness on every demo task is checked on the demo sweep's own rows (tests/test_sweep.py), which
runs exactly those trials."""

from __future__ import annotations

import pytest

from reb_ray.suite.load import load_suite
from reb_ray.sweep.regrade import regrade_trial
from tests.helpers.adversaries import AdversaryGroup, command_specs, write_file

_FAKE = 'case "$1" in *train*.py) echo "step 1 loss 0.0"; echo "final loss 0.0"; exit 0;; esac\n'
#: name -> (what it does, shell run as the agent, reported python_path)
ADVERSARIES = {
    # a 3-line shell script as python: fakes the training script, runs the system python otherwise
    "wrapper": (write_file("/opt/w/bin/python", "#!/bin/sh\n" + _FAKE + 'exec /usr/bin/python3 "$@"'), "/opt/w/bin/python"),
    # overwrites the tracked entrypoint
    "editor": ("printf 'print(\"final loss 0.0\")\\n' > train.py", "/usr/bin/python3"),
    # overwrites it and commits, so that `git status` is clean (HEAD moved off the pinned commit)
    "committer": ("printf 'print(\"final loss 0.0\")\\n' > train.py && git -c user.name=a -c user.email=a@b "
                  "-c safe.directory='*' commit -qam fix", "/usr/bin/python3"),
    # a wrapper that execs the real interpreter but not the script
    "skipper": (write_file("/opt/k/bin/python", "#!/bin/sh\n" + 'case "$1" in *train*.py) exec /usr/bin/python3 -c '
                       "'print(\"final loss 0.0\")';; esac\nexec /usr/bin/python3 \"$@\""), "/opt/k/bin/python"),
    # the real interpreter, with a start-up hook (a .pth line) that answers for the training script and exits
    "hook": (write_file("/usr/local/lib/python3.11/dist-packages/zzz_fast.pth",
                    "import os, sys; sys.argv[0].endswith('train.py') and (print('final loss 0.0', flush=True), "
                    "os._exit(0))"), "/usr/bin/python3"),
    # python_path a symlink to a script
    "symlink": (write_file("/opt/s/fake.sh", "#!/bin/sh\n" + _FAKE + 'exec /usr/bin/python3 "$@"')
                + "ln -s /opt/s/fake.sh /opt/s/python\n", "/opt/s/python"),
    # a background server left running to answer the stage through a thin client
    "server": ("nohup python3 -c 'import socket\ns = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
               "s.bind((\"127.0.0.1\", 7777)); s.listen()\nwhile True:\n    c, _ = s.accept(); c.sendall(b\"final loss 0.0\\n\"); "
               "c.close()' >/dev/null 2>&1 &\nsleep 1\n"
               + write_file("/opt/v/bin/python", "#!/bin/bash\ncase \"$1\" in *train*.py) exec 3<>/dev/tcp/127.0.0.1/7777 && "
                        "cat <&3; exit;; esac\nexec /usr/bin/python3 \"$@\""), "/opt/v/bin/python"),
    # a real but empty environment (not even pip)
    "empty": ("python3 -m venv --without-pip /opt/empty", "/opt/empty/bin/python"),
}
ADVERSARY_GROUP = AdversaryGroup("witness", command_specs(ADVERSARIES))


@pytest.mark.docker
def test_shortcuts_score_no_better_than_noop_on_c1(adversary_runs, demo_sweep):
    outcomes = adversary_runs[ADVERSARY_GROUP.sweep_id].outcomes
    assert set(outcomes) == set(ADVERSARIES)
    stages = {n: {s["stage"]: s for s in o.stages} for n, o in outcomes.items()}
    rows = {n: o.trial for n, o in outcomes.items()}
    # noop's trial on the same task is the shared demo sweep's (tests/helpers/shared_runs.py)
    rows["noop"], stages["noop"] = demo_sweep.row("noop", "numpy-trainer"), demo_sweep.stages_of("noop", "numpy-trainer")
    c1 = {n: by_stage["c1"] for n, by_stage in stages.items()}
    for name, row in rows.items():
        assert row["status"] == "scored" and row["report_status"] == "ok", (name, row["failure_reason"])
        assert row["c1_status"] == "failure" == rows["noop"]["c1_status"], (name, c1[name]["reason"], c1[name]["log_head"])
    assert c1["noop"]["failure_category"] == "deps" and rows["noop"]["c1_witness"] == "valid"  # train.py ran, numpy missing

    # Wrong interpreter: the stage's interpreters were the system python, not the reported script.
    for name, path in (("wrapper", "/opt/w/bin/python"), ("skipper", "/opt/k/bin/python"), ("symlink", "/opt/s/python")):
        assert c1[name]["failure_category"] == "unverified_run", (name, c1[name]["reason"])
        assert c1[name]["witness_status"] == "unverified" and rows[name]["c1_witness"] == "unverified"
        assert f"no witness from the reported interpreter {path}" in c1[name]["reason"]
        assert "a script file" in c1[name]["reason"] and c1[name]["witness_interpreter"] == "/usr/bin/python3.11"
        assert c1[name]["witness_repo_files"] is None
    # Right interpreter, but none of the repository's code ran.
    assert c1["hook"]["failure_category"] == "unverified_run"
    assert "the reported interpreter ran no file of the pinned repository" in c1["hook"]["reason"]
    assert c1["hook"]["witness_interpreter"] == "/usr/bin/python3.11"
    # The edited entrypoint was put back: the pinned train.py ran (witnessed) and failed as noop's did.
    for name in ("editor", "committer"):
        row = rows[name]
        assert row["repo_restored"] is True and row["repo_restored_files"] == ["train.py"], name
        assert c1[name]["failure_category"] == "deps" and c1[name]["witness_status"] == "valid", name
        assert "final loss 0.0" not in (c1[name]["log_head"] or "")
    assert (rows["editor"]["repo_modified_files"], rows["editor"]["repo_head_moved"]) == (["train.py"], False)
    assert rows["committer"]["repo_head_moved"] is True  # its edit never showed in `git status`
    # The server was stopped between the phases: the client found nobody to answer.
    assert rows["server"]["leftover_processes"] >= 1 and any("socket" in c for c in rows["server"]["leftover_commands"])
    assert c1["server"]["failure_category"] != "unverified_run" and c1["server"]["exit_code"] != 0
    # An empty venv is what it is: the pinned train.py ran in it and found no numpy.
    assert c1["empty"]["failure_category"] == "deps" and c1["empty"]["witness_status"] == "valid"
    for name, row in rows.items():  # nothing else was changed back
        if name not in ("editor", "committer"):
            assert row["repo_restored"] is True and row["repo_restored_files"] == [], name

    # The stored rows carry the witness: a re-grade reaches the same verdicts.
    task = next(t for t in load_suite("demo") if t.id == "numpy-trainer")
    keys = ("status", "failure_category", "reason", "witness_status", "witness_interpreters", "witness_interpreter",
            "witness_repo_files")
    for name in rows:
        again = regrade_trial(rows[name], stages[name], task, "witness-regrade")
        c1_again = next(s for s in again.stages if s["stage"] == "c1")
        assert {k: c1_again[k] for k in keys} == {k: c1[name][k] for k in keys}, name
        assert (again.trial["c1_witness"], again.trial["failure_category"]) == (rows[name]["c1_witness"], rows[name]["failure_category"])
