"""The real `reb-ray tasks` console commands: list (table and JSON), validate, bad input."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.models.test_task import DEMO_C0, VALID, write_task


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["reb-ray", *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def test_list_json_one_object_per_task():
    res = run("tasks", "list", "--suite", "demo", "--json")
    assert res.returncode == 0, res.stderr
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    assert [r["id"] for r in rows] == sorted(DEMO_C0)
    for row in rows:
        assert row["suite"] == "demo" and row["repo"] == "bundled:repo" and row["commit"] is None
        assert (row["supports_cpu"], row["supports_single_gpu"], row["supports_multi_gpu"]) == (True, False, False)
        assert row["c0_baseline_total"] == DEMO_C0[row["id"]] and row["gpus_needed"] == 0


def test_list_table_and_all_suites():
    res = run("tasks", "list")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].split() == ["id", "suite", "source", "cpu", "1gpu", "multigpu", "c0"]
    by_id = {line.split()[0]: line.split() for line in lines[1:]}
    assert by_id["torch-tiny"] == ["torch-tiny", "demo", "bundled:repo", "yes", "-", "-", "1"]
    assert set(DEMO_C0) <= set(by_id)


def test_validate_counts_per_suite():
    res = run("tasks", "validate")
    assert res.returncode == 0, res.stderr
    assert "demo: 4 task(s) ok" in res.stdout.splitlines()
    res = run("tasks", "validate", "--suite", "demo")
    assert res.returncode == 0 and res.stdout.strip() == "demo: 4 task(s) ok"


def test_unknown_suite_exits_2_with_one_line():
    res = run("tasks", "validate", "--suite", "nope")
    assert res.returncode == 2
    assert len(res.stderr.strip().splitlines()) == 1
    assert res.stderr.startswith("error: unknown suite 'nope' in ") and "valid: " in res.stderr and "demo" in res.stderr
    res = run("tasks", "list", "--suite", "nope", "--json")
    assert res.returncode == 2 and res.stdout == ""


def test_invalid_task_file_exits_2_naming_file_field_value(tmp_path):
    root = tmp_path / "tasks"
    write_task(root, VALID.replace("timeout_s = 30", "timeout_s = -5"))
    res = run("tasks", "validate", "--root", str(root), cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr == "error: tasks/s1/bad-task/task.toml: stages.cpu.timeout_s = -5: Input should be greater than 0\n"


def test_custom_root_lists_git_task(tmp_path):
    root = tmp_path / "tasks"
    write_task(root, VALID)
    res = run("tasks", "list", "--root", str(root), "--json")
    assert res.returncode == 0, res.stderr
    row = json.loads(res.stdout)
    assert row["repo"] == "owner/name" and row["commit"] == "0123456789abcdef0123456789abcdef01234567"
    assert row["supports_multi_gpu"] and row["gpus_needed"] == 4 and row["c0_baseline_total"] == 3
