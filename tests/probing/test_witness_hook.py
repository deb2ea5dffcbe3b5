"""The witness hook and collector with real interpreters, real processes and a real git
repository on this machine (the hook started through its PYTHONPATH sitecustomize), graded by
the pure grader; and the grader's rules on hand-made records."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from reb_ray.grading.witness import apply_witness, grade_witness
from reb_ray.paths import bundled_dir
from reb_ray.probing.witness import WITNESS_ENV, pth_line

PROBES = bundled_dir("probes")
HOOK_DIR = PROBES / "witness"
PY = sys.executable


@pytest.fixture
def repo(tmp_path) -> tuple[Path, str]:
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "__init__.py").write_text("VALUE = 3\n")
    (repo / "main.py").write_text("import sys, pkg, packaging.version, six\nprint('value', pkg.VALUE)\n")
    (repo / "die.py").write_text("import os, pkg\nos._exit(0)\n")
    (repo / "kill.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    (repo / "forks.py").write_text("import os, sys, pkg\npid = os.fork()\nif pid == 0:\n    sys.exit(0)\nos.waitpid(pid, 0)\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "pin"], cwd=repo, check=True, env=env)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()
    return repo, commit


def _run_stage(tmp_path: Path, repo: Path, commit: str, argv: list[str], env_extra: dict | None = None,
               nonce: str | None = None) -> dict:
    """Run one 'stage' (argv in the repository, the hook on PYTHONPATH) and collect its record."""
    nonce = nonce or uuid.uuid4().hex
    out = tmp_path / f"w-{nonce}"
    out.mkdir()
    env = {**os.environ, "PYTHONPATH": str(HOOK_DIR),
           WITNESS_ENV: json.dumps({"nonce": nonce, "out": str(out), "repo": str(repo)}), **(env_extra or {})}
    subprocess.run(argv, cwd=repo, env=env, capture_output=True, timeout=120)
    record = tmp_path / f"record-{nonce}.json"
    subprocess.run([PY, "-I", "-S", str(PROBES / "witness_collect.py"), "--dir", str(out), "--nonce", nonce, "--python", PY,
                    "--repo", str(repo), "--commit", commit, "--prefix", sys.prefix, "--out", str(record)], check=True, timeout=120)
    return json.loads(record.read_text())


def test_a_repository_script_in_the_reported_interpreter_is_witnessed(tmp_path, repo):
    repo_dir, commit = repo
    raw = _run_stage(tmp_path, repo_dir, commit, [PY, "main.py"])
    verdict = grade_witness(raw)
    assert verdict["witness_status"] == "valid", verdict
    assert verdict["witness_repo_files"] == 2 and verdict["witness_interpreters"] == 1  # main.py, pkg/__init__.py
    (record,) = raw["records"]
    assert record["phase"] == "exit" and record["prefix_realpath"] == os.path.realpath(sys.prefix)
    assert {f["path"] for f in record["repo_files"]} == {"main.py", "pkg/__init__.py"}
    assert all(f["pinned"] for f in record["repo_files"]) and "pytest" not in record["modules"]
    # third-party modules with the distribution that owns each (a package, a single-file module)
    assert record["modules"]["packaging"]["dist"] == "packaging" and record["modules"]["six"]["dist"] == "six"
    assert "json" not in record["modules"] and "_reb_ray_witness" not in record["modules"]


def test_os_exit_and_sigkill_still_show_the_script_started(tmp_path, repo):
    repo_dir, commit = repo
    for script in ("die.py", "kill.py"):
        raw = _run_stage(tmp_path, repo_dir, commit, [PY, script])
        (record,) = raw["records"]
        assert record["phase"] == "main" and record["main"]["pinned"] is True, script
        assert grade_witness(raw)["witness_status"] == "valid", script


def test_a_forked_child_writes_its_own_record(tmp_path, repo):
    repo_dir, commit = repo
    raw = _run_stage(tmp_path, repo_dir, commit, [PY, "forks.py"])
    records = raw["records"]
    assert len(records) == 2 and sorted(r["forked"] for r in records) == [False, True]
    assert len({r["pid"] for r in records}) == 2


def test_no_repository_code_or_an_edited_file_is_unverified(tmp_path, repo):
    repo_dir, commit = repo
    verdict = grade_witness(_run_stage(tmp_path, repo_dir, commit, [PY, "-c", "print('final loss 0.0')"]))
    assert verdict["witness_status"] == "unverified" and "ran no file of the pinned repository" in verdict["witness_reason"]
    assert "command print('final loss 0.0')" in verdict["witness_reason"]
    (repo_dir / "main.py").write_text("print('final loss 0.0')\n")  # not the pinned blob any more
    (repo_dir / "pkg" / "__init__.py").write_text("")
    verdict = grade_witness(_run_stage(tmp_path, repo_dir, commit, [PY, "main.py"]))
    assert verdict["witness_status"] == "unverified", verdict


def test_the_environments_own_sitecustomize_still_runs(tmp_path, repo):
    repo_dir, commit = repo
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text("import builtins\nbuiltins.AGENT_HOOK = 42\n")
    (repo_dir / "hooked.py").write_text("print('hook', AGENT_HOOK)\n")
    nonce = uuid.uuid4().hex
    out = tmp_path / f"w-{nonce}"
    out.mkdir()
    env = {**os.environ, "PYTHONPATH": f"{HOOK_DIR}:{theirs}",
           WITNESS_ENV: json.dumps({"nonce": nonce, "out": str(out), "repo": str(repo_dir)})}
    proc = subprocess.run([PY, "hooked.py"], cwd=repo_dir, env=env, capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "hook 42" and proc.returncode == 0, proc.stderr
    assert len(list(out.glob("*.json"))) == 1


def test_another_nonce_or_interpreter_does_not_count(tmp_path, repo):
    repo_dir, commit = repo
    raw = _run_stage(tmp_path, repo_dir, commit, [PY, "main.py"])
    forged = dict(raw, nonce="0" * 32)
    assert "no interpreter of the stage wrote a witness with its nonce (1 file(s) with another nonce)" \
        in grade_witness(forged)["witness_reason"]
    other = dict(raw, python_realpath="/opt/other/bin/python3.12", python_kind="elf")
    assert "no witness from the reported interpreter" in grade_witness(other)["witness_reason"]
    wrong_prefix = dict(raw, expected_prefix="/opt/some-venv")  # the base interpreter ran, not the venv
    assert grade_witness(wrong_prefix)["witness_status"] == "unverified"


def test_grading_rules_on_records():
    assert grade_witness(None)["witness_status"] == "missing"
    assert grade_witness({"error": "boom"})["witness_reason"] == "the witness collector failed: boom"
    assert grade_witness({"nonce": "n", "records": [{"nonce": "n", "repo_files": 7}]})["witness_status"] == "unverified"
    ok = {"status": "success", "failure_category": None, "reason": None}
    failed = {"status": "failure", "failure_category": "deps", "reason": "exit code 1"}
    missing = grade_witness(None)
    assert apply_witness(ok, missing)["failure_category"] == "unverified_run"
    assert apply_witness(ok, missing)["reason"].startswith("command succeeded but the run is unverified: no witness record")
    assert apply_witness(failed, missing) == failed
    # every verdict short of valid fails a success, not only a missing witness
    unverified = grade_witness({"nonce": "n", "records": [{"nonce": "n", "repo_files": 7}]})
    assert apply_witness(ok, unverified)["failure_category"] == "unverified_run"


def test_the_pth_line_is_one_import_line_that_never_raises(tmp_path):
    line = pth_line("n" * 32, "/nonexistent/out", "/repo", "/nonexistent/hook")
    assert "\n" not in line and line.startswith("import ")
    exec(line, {})  # the hook directory is missing: nothing raised into start-up
