"""Forged witness records against the kernel's trace (real Docker, the `command` agent on the
demo task numpy-trainer, in the session's batch of adversaries, tests/helpers/adversaries.py):
each forger scores no better than `noop` on C1, and its row says
`unverified_run`. The honest `heuristic` trials of the shared demo sweep
(tests/helpers/shared_runs.py) ran observed too: their C1 passes with a trace that agrees, on
every demo task (no false positive). The parsing of strace's output and the rule are proven
in the unit tier (tests/grading/test_observed.py) on real traces captured once."""

from __future__ import annotations

import json

import pytest

from reb_ray.suite.load import load_suite
from reb_ray.sweep.regrade import regrade_trial
from tests.helpers.adversaries import AdversaryGroup, command_specs, write_file
from tests.helpers.shared_runs import DEMO_TASKS

# Writes, for process PID ($1) with binary EXE ($2), a witness record that claims the script $3
# ran as __main__ from the pinned repository, with the nonce and directory from the stage's
# environment (what the hook itself reads), and the blob hashed as the hook does.
_FORGE = r'''import hashlib, json, os, sys
cfg = json.loads(os.environ["REB_RAY_WITNESS"])
pid, exe, script = int(sys.argv[1]), sys.argv[2], sys.argv[3]
repo, path = os.path.realpath(cfg["repo"]), os.path.realpath(script)
data = open(path, "rb").read()
blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
rel = os.path.relpath(path, repo)
main = {"kind": "file", "value": script, "path": path, "repo_path": rel, "blob": blob}
record = {"v": 1, "nonce": cfg["nonce"], "phase": "exit", "via": "pth", "pid": pid, "forked": False,
          "executable": exe, "executable_realpath": exe, "proc_exe": exe, "prefix": "/usr", "prefix_realpath": "/usr",
          "main": main, "repo_files": [{"path": rel, "blob": blob, "module": "__main__"}], "modules": {}}
with open(os.path.join(cfg["out"], "%d-1.json" % pid), "w") as f:
    json.dump(record, f)
'''

#: name -> (shell run as the agent, reported python_path)
FORGERS = {
    # the wrapper: a script reported as the interpreter that, for the training script, opens
    # it (as running it would), forges the record for its own PID and binary, and prints success
    "forger": (write_file("/opt/forge.py", _FORGE, "644")
               + write_file("/opt/f/bin/python", '#!/bin/sh\ncase "$1" in *train*.py)\n  cat "$1" >/dev/null\n'
                        '  /usr/bin/python3 /opt/forge.py "$$" /opt/f/bin/python "$1"\n'
                        '  echo "step 1 loss 0.0"; echo "final loss 0.0"; exit 0;;\nesac\nexec /usr/bin/python3 "$@"'),
               "/opt/f/bin/python"),
    # the real interpreter, with a start-up line that forges the record of the process itself (the
    # real binary, the right prefix, its own PID) for the training script, prints success and exits
    # before the interpreter opens the script
    "hook-forger": (write_file("/opt/forge.py", _FORGE, "644")
                    + write_file("/usr/local/lib/python3.11/dist-packages/zzz_forge.pth",
                             "import os, sys, subprocess; sys.argv[0].endswith('train.py') and (subprocess.run(["
                             "'/usr/bin/python3', '/opt/forge.py', str(os.getpid()), os.readlink('/proc/self/exe'), "
                             "sys.argv[0]]), print('step 1 loss 0.0\\nfinal loss 0.0', flush=True), os._exit(0))", "644"),
                    "/usr/bin/python3"),
}
ADVERSARY_GROUP = AdversaryGroup("observed", command_specs(FORGERS))


@pytest.mark.docker
def test_forged_witness_records_score_no_better_than_noop(adversary_runs, demo_sweep):
    outcomes = adversary_runs[ADVERSARY_GROUP.sweep_id].outcomes
    assert set(outcomes) == set(FORGERS)
    stages = {n: {s["stage"]: s for s in o.stages} for n, o in outcomes.items()}
    rows = {n: o.trial for n, o in outcomes.items()}
    noop = demo_sweep.row("noop", "numpy-trainer")
    for name, row in rows.items():
        c1 = stages[name]["c1"]
        assert row["status"] == "scored" and row["report_status"] == "ok", (name, row["failure_reason"])
        assert row["c1_status"] == "failure" == noop["c1_status"], (name, c1["reason"], c1["log_head"])
        assert c1["failure_category"] == "unverified_run" and row["c1_witness"] == "unverified", (name, c1["reason"])
        assert "final loss 0.0" in (c1["log_head"] or ""), name  # it did print the success line
    # The wrapper is a script: no interpreter can have it as its binary, whatever a record says.
    assert "no witness from the reported interpreter /opt/f/bin/python" in stages["forger"]["c1"]["reason"]
    assert "a script file" in stages["forger"]["c1"]["reason"]
    # The real interpreter's forged record passes everything the record shows; the trace shows the
    # process never opened the script it claims to have run.
    hook = stages["hook-forger"]["c1"]
    assert hook["witness_observed"] == "contradicts", hook["reason"]
    assert "the kernel's trace contradicts the witness" in hook["reason"] and "train.py" in hook["reason"]
    # The stored rows carry the trace's record: a re-grade reaches the same verdicts.
    task = next(t for t in load_suite("demo") if t.id == "numpy-trainer")
    for name in rows:
        again = next(s for s in regrade_trial(rows[name], stages[name], task, "observed-regrade").stages
                     if s["stage"] == "c1")
        for key in ("status", "failure_category", "reason", "witness_status", "witness_observed"):
            assert again[key] == stages[name]["c1"][key], (name, key)


@pytest.mark.docker
def test_honest_runs_agree_with_their_trace(demo_sweep):
    """No false positive: every demo task's honest C1 passes, observed, with a trace that agrees;
    noop's C1 (the pinned train.py ran and found no numpy) agrees too."""
    for task in DEMO_TASKS:
        c1 = demo_sweep.stages_of("heuristic", task)["c1"]
        assert c1["status"] == "success", (task, c1["reason"])
        assert (c1["witness_status"], c1["witness_observed"]) == ("valid", "agrees"), (task, c1["reason"])
        raw = json.loads(c1["raw"])["witness"]
        assert raw["observer"]["status"] == "ok" and raw["observer"]["reached"] == [], task
    noop = demo_sweep.stages_of("noop", "numpy-trainer")["c1"]
    assert (noop["failure_category"], noop["witness_observed"]) == ("deps", "agrees")
