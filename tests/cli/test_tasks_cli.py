"""The real `reb-ray tasks` console commands: list (table and JSON), validate, bad input."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.models.test_task import DEMO_C0, VALID, write_task
from tests.cli.in_process import run_cli


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return run_cli(*args, cwd=cwd)


def test_list_json_one_object_per_task():
    res = run("tasks", "list", "--suite", "demo", "--json")
    assert res.returncode == 0, res.stderr
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    assert [r["id"] for r in rows] == sorted(DEMO_C0)
    for row in rows:
        assert row["suite"] == "demo" and row["repo"] == "bundled:repo" and row["commit"] is None
        assert (row["supports_cpu"], row["supports_single_gpu"], row["supports_multi_gpu"]) == (True, False, False)
        assert row["c0_baseline_total"] == DEMO_C0[row["id"]]
        # C2 needs a GPU: torch-tiny, the one demo task that keeps C2, is a 1-GPU trial.
        assert row["gpus_needed"] == (1 if row["id"] == "torch-tiny" else 0)
        assert row["cuda_check"] is (row["id"] == "torch-tiny")


def test_list_table_and_all_suites():
    res = run("tasks", "list")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].split() == ["id", "suite", "source", "cpu", "c2", "1gpu", "multigpu", "c0", "deviation"]
    by_id = {line.split()[0]: line.split() for line in lines[1:] if line.strip()}
    assert by_id["torch-tiny"] == ["torch-tiny", "demo", "bundled:repo", "yes", "yes", "-", "-", "1", "-"]
    assert by_id["numpy-trainer"][3:6] == ["yes", "-", "-"]  # C2 opted out of a CPU-only task
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
    res = run("tasks", "validate", "--tasks-root", str(root), cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr == "error: tasks/s1/bad-task/task.toml: stages.cpu.timeout_s = -5: Input should be greater than 0\n"


def test_custom_root_lists_git_task(tmp_path):
    root = tmp_path / "tasks"
    write_task(root, VALID)
    res = run("tasks", "list", "--tasks-root", str(root), "--json")
    assert res.returncode == 0, res.stderr
    row = json.loads(res.stdout)
    assert row["repo"] == "owner/name" and row["commit"] == "0123456789abcdef0123456789abcdef01234567"
    assert row["supports_multi_gpu"] and row["gpus_needed"] == 4 and row["c0_baseline_total"] == 3


def test_c0_baseline_scans_the_pinned_commit_of_each_mirror_and_compares(tmp_path):
    """A real git repository (the F04 layout) mirrored bare, a task pinned to its first commit
    with a canonical total of 5: the scan finds 4 (delta -1) and names dnnlib as resolvable only
    through a runtime sys.path edit; a task whose mirror is missing is reported and exits 1."""
    from tests.test_c0_baseline import F04_FILES, commit_files, git

    src = tmp_path / "src"
    commit = commit_files(src, F04_FILES, "one")
    commit_files(src, {"later.py": "import later_dep\n"}, "two")
    mirrors = tmp_path / "mirrors"
    git("clone", "-q", "--mirror", str(src), str(mirrors / "owner" / "stylegan.git"), cwd=tmp_path)
    root = tmp_path / "tasks"
    task = VALID.replace("https://github.com/owner/name.git", "https://github.com/owner/stylegan")
    task = task.replace("0123456789abcdef0123456789abcdef01234567", commit).replace("c0_baseline_total = 3", "c0_baseline_total = 5")
    write_task(root, task, task_id="bad-task")
    write_task(root, VALID.replace('id = "bad-task"', 'id = "no-mirror"'), task_id="no-mirror")

    res = run("tasks", "c0-baseline", "--suite", "s1", "--tasks-root", str(root), "--repo-mirror", str(mirrors), "--json")
    rows = {row["id"]: row for row in map(json.loads, res.stdout.splitlines())}
    assert res.returncode == 1, res.stderr
    assert rows["bad-task"] == {"id": "bad-task", "canonical": 5, "scanned": 4, "delta": -1, "third_party": 1,
                                "runtime_path": ["dnnlib"], "syntax_errors": 0}
    assert "no mirror of owner/name" in rows["no-mirror"]["error"]
    table = run("tasks", "c0-baseline", "--suite", "s1", "--tasks-root", str(root), "--repo-mirror", str(mirrors), "--tasks", "bad-*")
    assert table.returncode == 0 and table.stdout.strip() == (
        "bad-task: canonical 5, scanned 4 (delta -1); third-party 1, runtime sys.path only: dnnlib")


def test_list_shows_each_deviation_from_the_release_beside_its_stage(tmp_path):
    root = tmp_path / "tasks"
    why = "exit 124 after `timeout -s INT 8s` counts as success; the release requires exit 0 on SIGINT"
    write_task(root, VALID.replace('command = "python train.py"', f'command = "python train.py"\ndeviation = "{why}"'))
    write_task(root, VALID.replace('id = "bad-task"', 'id = "plain"'), task_id="plain")
    res = run("tasks", "list", "--tasks-root", str(root), "--json")
    assert res.returncode == 0, res.stderr
    rows = {r["id"]: r for r in map(json.loads, res.stdout.splitlines())}
    assert rows["bad-task"]["deviations"] == {"cpu": why} and rows["plain"]["deviations"] == {}
    res = run("tasks", "list", "--tasks-root", str(root))
    lines = res.stdout.splitlines()
    assert lines[1].split()[-1] == "cpu" and lines[2].split()[-1] == "-"
    assert lines[-2:] == ["deviations from the paper's release:", f"  bad-task cpu: {why}"]
