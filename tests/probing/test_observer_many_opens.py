"""The kernel's trace of a stage whose interpreter opens thousands of files before the
repository's: kyegomez--visionmamba's C1 (its task helper imports torch, zetascale and
transformers, 9,382 opens, then the repository's `vision_mamba`) was failed as `unverified_run`
("the trace shows no pinned repository file opened") by the reference recipe, because the trace
kept only the first 400 opened files of each program, whatever they were. The trace here is a
real one (tests/grading/data/strace_honest_file.txt, the toolbox's reader on the node's strace)
with 9,000 site-packages opens of the same process, in strace's own format, inserted between the
script and the repository package, as a torch import puts them.
"""

from __future__ import annotations

from pathlib import Path

from reb_ray.grading.observed import parse_trace, summarize
from reb_ray.grading.witness import grade_witness, stage_entries
from reb_ray.probing.observer import summarize_trace

DATA = Path(__file__).parents[1] / "grading" / "data"
REPO = "/work/repo"
PYTHON = "/usr/bin/python3.11"
HELPER = "/opt/reb-ray-toolbox/task-helpers/run_example.py"
COMMAND = "python $REB_RAY_HELPERS/run_example.py --device cpu"  # names no repository entry
OPENS = 9000


def _heavy_trace() -> tuple[str, int]:
    lines = (DATA / "strace_honest_file.txt").read_text().splitlines()
    first_pkg = next(i for i, line in enumerate(lines) if "</work/repo/pkg/__init__.py>" in line)
    pid = int(lines[first_pkg].split()[0])
    site = "/opt/envs/reference/lib/python3.11/site-packages/torch"
    noise = [f'{pid}   openat(AT_FDCWD</work/repo>, "{site}/m{i}.py", O_RDONLY|O_CLOEXEC) = 3<{site}/m{i}.py>'
             for i in range(OPENS)]
    return "\n".join(lines[:first_pkg] + noise + lines[first_pkg:]) + "\n", pid


def _witness(pid: int) -> dict:
    record = {"nonce": "n", "pid": pid, "proc_exe": PYTHON, "prefix_realpath": "/usr",
              "main": {"kind": "file", "value": HELPER, "path": HELPER, "pinned": False},
              "repo_files": [{"path": "pkg/__init__.py", "pinned": True, "module": "pkg"},
                             {"path": "pkg/model.py", "pinned": True, "module": "pkg.model"}]}
    return {"nonce": "n", "records": [record]}


def _raw(observer: dict, witness: dict) -> dict:
    return {"nonce": "n", "python_path": "/usr/bin/python3", "python_realpath": PYTHON, "python_kind": "elf",
            "expected_prefix": "/usr", "pinned_known": True, "repo": REPO, "records": witness["records"],
            "entries": stage_entries(COMMAND),
            "observer": {"status": "ok", **observer, "realpaths": {"/usr/bin/python3": PYTHON, "/opt/shim/python": "/opt/shim/python"}}}


def test_repository_files_opened_after_thousands_of_others_still_agree():
    text, pid = _heavy_trace()
    witness = _witness(pid)
    summary = summarize_trace(text, (), witness, REPO)
    python = [p for p in summary["pids"][str(pid)] if p["path"] == "/usr/bin/python3"][0]
    assert {f"{REPO}/pkg/__init__.py", f"{REPO}/pkg/model.py"} <= set(python["opened"])
    assert python["opened_total"] > OPENS  # every open is still counted
    verdict = grade_witness(_raw(summary, witness))
    assert (verdict["witness_status"], verdict["witness_observed"]) == ("valid", "agrees"), verdict


def test_a_cap_over_every_open_is_what_failed_the_honest_stage():
    """The control: the same trace kept the way it was before (the first files, whatever they
    are) loses the repository's and contradicts the record, as the recipe's row showed."""
    text, pid = _heavy_trace()
    witness = _witness(pid)
    old = summarize(parse_trace(text), [pid], {HELPER}, REPO)
    verdict = grade_witness(_raw(old, witness))
    assert verdict["witness_observed"] == "contradicts" and "no pinned repository file opened" in verdict["witness_reason"]


def test_a_process_that_never_opened_the_repository_still_contradicts():
    text, pid = _heavy_trace()
    text = "\n".join(line for line in text.splitlines() if "</work/repo/pkg" not in line) + "\n"
    witness = _witness(pid)
    verdict = grade_witness(_raw(summarize_trace(text, (), witness, REPO), witness))
    assert verdict["witness_observed"] == "contradicts"
