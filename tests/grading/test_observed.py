"""The kernel's trace of a command stage, parsed and judged (pure functions on real traces).

tests/grading/data/strace_*.txt are real outputs of the toolbox's reader
(probes/observer/trace_run.py) running the node's strace in the sandbox image, captured once
on a repository /work/repo holding train.py (imports pkg.model, forks a child) and pkg/main.py,
with the toolbox-like shim /opt/shim/python (`exec /usr/bin/python3 "$@"`) first on PATH:

    honest_file     sh -c 'python train.py --steps 1'
    honest_module   sh -c 'python -m pkg.main'
    hook_exit       the same as honest_file with a .pth line in the interpreter's site-packages
                    that prints a success line and exits when the script is train.py
    tamper_fd       a stage that writes a forged strace line into /proc/<strace>/fd/3 (its
                    output FIFO) before running train.py

The witness records are made here for the PIDs the traces show, as the collector writes them.
"""

from __future__ import annotations

from pathlib import Path

from reb_ray.grading.observed import parse_trace, script_of, summarize
from reb_ray.grading.witness import apply_witness, grade_witness, stage_entries

DATA = Path(__file__).parent / "data"
REPO = "/work/repo"
PYTHON = "/usr/bin/python3.11"
REALPATHS = {"/usr/bin/python3": PYTHON, "/opt/shim/python": "/opt/shim/python", "/usr/bin/sh": "/usr/bin/dash"}


def _trace(name: str, observer_pids=()):
    return parse_trace((DATA / f"strace_{name}.txt").read_text(), observer_pids)


def _python_pid(trace) -> int:
    return next(pid for pid, programs in trace.programs.items() if any(p.path == "/usr/bin/python3" for p in programs))


def _record(pid: int, main: dict, files=("train.py", "pkg/__init__.py", "pkg/model.py")) -> dict:
    return {"nonce": "n", "pid": pid, "proc_exe": PYTHON, "prefix_realpath": "/usr", "main": main,
            "repo_files": [{"path": f, "pinned": True, "module": f} for f in files]}


def _raw(trace, records: list[dict], command: str, observer_pids=(), status="ok") -> dict:
    observer = {"status": status, **summarize(trace, [r["pid"] for r in records], set(), REPO),
                "realpaths": REALPATHS} if status == "ok" else {"status": status, "reason": "why"}
    return {"nonce": "n", "python_path": "/usr/bin/python3", "python_realpath": PYTHON, "python_kind": "elf",
            "expected_prefix": "/usr", "pinned_known": True, "repo": REPO, "records": records,
            "entries": stage_entries(command), "observer": observer}


MAIN_FILE = {"kind": "file", "value": "train.py", "path": f"{REPO}/train.py", "repo_path": "train.py", "pinned": True}


def test_an_honest_trace_is_parsed_per_process_and_program():
    trace = _trace("honest_file")
    pid = _python_pid(trace)
    shim, python = trace.programs[pid]
    assert (shim.path, shim.argv) == ("/opt/shim/python", ["python", "train.py", "--steps", "1"])
    assert python.argv == ["/usr/bin/python3", "train.py", "--steps", "1"] and python.cwd == REPO
    assert {f"{REPO}/train.py", f"{REPO}/pkg/model.py", f"{REPO}/pkg/__init__.py"} <= set(python.opened)
    assert f"{REPO}/train.py" not in shim.opened  # what a program opened stays with it
    assert trace.unparsed == 0 and trace.reached == [] and trace.exits[pid] == "exited with 0"
    # the forked child is a process of its own, without an exec (it writes its own witness record)
    child = max(trace.exits)
    assert child != pid and all(p.path == "" for p in trace.programs.get(child, []))


def test_an_honest_run_agrees_with_its_trace():
    trace = _trace("honest_file")
    raw = _raw(trace, [_record(_python_pid(trace), MAIN_FILE)], "python train.py --steps 1")
    verdict = grade_witness(raw)
    assert (verdict["witness_status"], verdict["witness_observed"]) == ("valid", "agrees"), verdict
    module = _trace("honest_module")
    main = {"kind": "module", "value": "pkg.main", "path": f"{REPO}/pkg/main.py", "repo_path": "pkg/main.py", "pinned": True}
    raw = _raw(module, [_record(_python_pid(module), main, ("pkg/main.py", "pkg/model.py"))], "python -m pkg.main")
    assert grade_witness(raw)["witness_observed"] == "agrees", grade_witness(raw)


def test_a_record_the_trace_contradicts_is_unverified():
    trace = _trace("honest_file")
    pid = _python_pid(trace)
    command = "python train.py --steps 1"
    # a start-up line that printed success and exited: the process never opened the script it claims
    hook = _trace("hook_exit")
    verdict = grade_witness(_raw(hook, [_record(_python_pid(hook), MAIN_FILE)], command))
    assert (verdict["witness_status"], verdict["witness_observed"]) == ("unverified", "contradicts")
    assert f"no run of {REPO}/train.py" in verdict["witness_reason"]
    graded = apply_witness({"status": "success", "failure_category": None, "reason": None}, verdict)
    assert graded["failure_category"] == "unverified_run" and "kernel's trace contradicts" in graded["reason"]
    # a record for a PID that never executed anything in the stage
    verdict = grade_witness(_raw(trace, [_record(4242, MAIN_FILE)], command))
    assert verdict["witness_observed"] == "contradicts" and "process 4242 never executed" in verdict["witness_reason"]
    # the shell's PID, which executed sh, never the reported interpreter
    shell = min(trace.programs)
    verdict = grade_witness(_raw(trace, [_record(shell, MAIN_FILE)], command))
    assert "never the reported interpreter" in verdict["witness_reason"], verdict
    # the module run claimed as a run of train.py: its argv runs -m pkg.main
    module = _trace("honest_module")
    verdict = grade_witness(_raw(module, [_record(_python_pid(module), MAIN_FILE)], command))
    assert verdict["witness_observed"] == "contradicts" and "'-m', 'pkg.main'" in verdict["witness_reason"]
    assert grade_witness(_raw(trace, [_record(pid, MAIN_FILE)], command))["witness_status"] == "valid"  # the control


def test_a_stage_that_reached_for_its_observer_is_tampered():
    raw_text = (DATA / "strace_tamper_fd.txt").read_text()
    strace_pid = int(raw_text.split('"/proc/')[1].split("/")[0])
    trace = parse_trace(raw_text, (strace_pid - 1, strace_pid))
    assert len(trace.reached) == 1 and f"/proc/{strace_pid}/fd/3" in trace.reached[0]
    # the forged line it wrote came after the open that the trace already holds
    assert 999 in trace.programs and trace.programs[999][0].argv == ["python3", "train.py"]
    verdict = grade_witness(_raw(trace, [_record(_python_pid(trace), MAIN_FILE)], "python train.py"))
    assert (verdict["witness_status"], verdict["witness_observed"]) == ("unverified", "tampered")
    assert "reached for its observer" in verdict["witness_reason"]
    # the observer's own files are recognised by name too, whoever's PID opened them
    assert parse_trace(raw_text).reached  # the resolved FIFO path names the observer's directory


def test_an_unusable_or_missing_trace():
    trace = _trace("honest_file")
    record = _record(_python_pid(trace), MAIN_FILE)
    for status in ("tampered", "incomplete"):
        verdict = grade_witness(_raw(trace, [record], "python train.py", status=status))
        assert (verdict["witness_status"], verdict["witness_observed"]) == ("unverified", status)
    # no strace on the node: the infrastructure's gap, judged on the record alone
    verdict = grade_witness(_raw(trace, [record], "python train.py", status="unavailable"))
    assert (verdict["witness_status"], verdict["witness_observed"]) == ("valid", "unavailable")
    # rows written before the observer carry none: judged as before
    raw = _raw(trace, [record], "python train.py")
    del raw["observer"]
    assert grade_witness(raw) | {"witness_observed": None} == grade_witness(raw) and grade_witness(raw)["witness_status"] == "valid"


def test_the_entry_must_have_run_as_main():
    trace = _trace("honest_file")
    pid = _python_pid(trace)
    helper = {"kind": "file", "value": "/opt/helper.py", "path": "/opt/helper.py", "pinned": False}
    raw = _raw(trace, [_record(pid, helper)], "python train.py")
    del raw["observer"]
    verdict = grade_witness(raw)
    assert verdict["witness_status"] == "unverified" and "did not run the stage's entry (train.py)" in verdict["witness_reason"]
    # a command that names no repository entry: an imported pinned file will do (and is what the trace checks)
    raw = _raw(trace, [_record(pid, {"kind": "command", "value": "import pkg", "pinned": None})], "python -c 'import pkg'")
    assert raw["entries"] == {"files": [], "modules": []}
    assert grade_witness(raw)["witness_observed"] == "agrees"
    # a script the interpreter's record says is not pinned (the collector hashed the edited file)
    raw = _raw(trace, [_record(pid, {**MAIN_FILE, "pinned": False}, ())], "python train.py")
    assert "ran no file of the pinned repository" in grade_witness(raw)["witness_reason"]


def test_a_script_reported_as_the_interpreter_is_never_its_binary():
    trace = _trace("honest_file")
    record = {**_record(_python_pid(trace), MAIN_FILE), "proc_exe": "/opt/f/bin/python"}
    raw = {**_raw(trace, [record], "python train.py"), "python_path": "/opt/f/bin/python",
           "python_realpath": "/opt/f/bin/python", "python_kind": "script"}
    verdict = grade_witness(raw)
    assert verdict["witness_status"] == "unverified" and "a script file" in verdict["witness_reason"]


def test_stage_entries_and_python_command_lines():
    assert stage_entries("python $REB_RAY_HELPERS/tiny_config.py /tmp/t.json && python train.py --steps 5") == \
        {"files": ["train.py"], "modules": []}
    assert stage_entries("python -m torch.distributed.run --standalone --nproc_per_node=1 ml/train.py --x=1") == \
        {"files": ["ml/train.py"], "modules": ["torch.distributed.run"]}
    assert stage_entries("PYTHONPATH=$PWD:x python -u src/run.py a", "sub") == {"files": ["sub/src/run.py"], "modules": []}
    assert stage_entries("python -c \"from x import y\"") == {"files": [], "modules": []}
    assert stage_entries("timeout -s INT 8s python -m lmcache.v1.standalone --config c") == \
        {"files": [], "modules": ["lmcache.v1.standalone"]}
    assert stage_entries("python 'unterminated") == {"files": [], "modules": []}
    assert script_of(["python", "-u", "-W", "ignore", "-X", "dev", "train.py"]) == ("file", "train.py")
    assert script_of(["python", "-Wignore", "-mpkg.main"]) == ("module", "pkg.main")
    assert script_of(["python", "-Bc", "print(1)"]) == ("command", None)
    assert script_of(["python", "-"]) == ("stdin", None) and script_of(["python"]) == ("stdin", None)
