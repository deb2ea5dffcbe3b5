"""The bundled `researchenvbench` suite: the paper's 44 tasks, loaded by reb-ray's own loader and
CLI, with the paper's denominators (C1 29, C2 44, C3 43, C4 32; C0 over 2858 imports)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from reb_ray.suite.load import load_suite
from reb_ray.probing.multi_gpu import launch_command
from tests.cli.in_process import run_cli

SUITE = "researchenvbench"
ROW_KEYS = {"id", "repo", "commit", "supports_cpu", "supports_single_gpu", "supports_multi_gpu", "c0_baseline_total"}
# a launcher in a command: `torchrun ...`, `accelerate launch ...`, `deepspeed ...`, `-m torch.distributed.run`, ...
LAUNCHER_IN_COMMAND = re.compile(r"(?:^|[\s;&|])(?:torchrun|deepspeed|accelerate\s+launch)(?:\s|$)"
                                 r"|-m\s+(?:torch\.distributed\.(?:run|launch)|accelerate\.commands\.launch|deepspeed)\b")
DATA = Path("/work/shared/data/researchenvbench")
RELEASE = Path("/work/.mirror/No-518+ResearchEnvBench/repo")  # the paper's release, fetched as test input


@pytest.fixture(scope="module")
def tasks():
    return load_suite(SUITE)


def test_44_tasks_with_the_papers_denominators(tasks):
    assert len(tasks) == 44
    assert sum(t.supports_cpu for t in tasks) == 29  # C1
    assert sum(t.stages.cuda.applicable for t in tasks) == 44  # C2
    assert sum(t.supports_single_gpu for t in tasks) == 43  # C3
    assert sum(t.supports_multi_gpu for t in tasks) == 32  # C4
    assert sum(t.c0_baseline_total for t in tasks) == 2858  # C0


def test_sources_are_pinned_git_commits(tasks):
    for task in tasks:
        assert task.source.kind == "git", task.id
        assert re.fullmatch(r"[0-9a-f]{40}", task.source.commit), task.id
    assert len({t.source.owner_repo for t in tasks}) == 44


def test_stages_are_complete(tasks):
    for task in tasks:
        for name in ("cpu", "single_gpu", "multi_gpu"):
            stage = getattr(task.stages, name)
            if stage.applicable:
                assert stage.command and stage.success.exit_code == 0, (task.id, name)
                # the release's runner.py --timeout-sec: 600 s for C1 and C3, 1200 s for C4
                assert stage.timeout_s == (1200 if name == "multi_gpu" else 600) or \
                    "timeout" in (stage.deviation or ""), (task.id, name)
            else:
                assert stage.skip_reason and stage.command is None, (task.id, name)
        if task.supports_multi_gpu:
            assert task.stages.multi_gpu.ranks == 2, task.id


def test_multi_gpu_commands_leave_the_launcher_to_the_harness(tasks):
    for task in tasks:
        stage = task.stages.multi_gpu
        if not stage.applicable:
            continue
        line = launch_command(stage, "/opt/env/bin/python", 29555, stage.ranks)
        if stage.launcher != "python":
            assert not LAUNCHER_IN_COMMAND.search(stage.command), task.id
            assert line.count("--master_port") + line.count("--main_process_port") == 1, task.id


def test_assets_live_under_the_task_and_cover_the_commands(tasks):
    for task in tasks:
        paths = [a.path for a in task.assets if a.layout == "files"]
        assert all(p.startswith(task.id + "/") for p in paths), task.id
        assert all(a.source.startswith("hf://") for a in task.assets if a.layout == "hf_cache"), task.id
        commands = " ".join(str(getattr(task.stages, n).command or "") for n in ("cpu", "single_gpu", "multi_gpu"))
        for used in re.findall(r"\$REB_RAY_ASSETS/([\w.\-]+/[\w.\-]+)", commands):
            assert any(p == used or p.startswith(used + "/") for p in paths), (task.id, used)
        assert not re.search(r"<[A-Za-z0-9][^<>\n]*>", commands), (task.id, "a CSV placeholder is left")


def test_cli_lists_the_suite_as_json():
    res = run_cli("tasks", "list", "--suite", SUITE, "--json")
    assert res.returncode == 0, res.stderr
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    assert len(rows) == 44
    for row in rows:
        assert ROW_KEYS <= row.keys(), row
        assert re.fullmatch(r"[^/\s]+/[^/\s]+", row["repo"]) and re.fullmatch(r"[0-9a-f]{40}", row["commit"]), row
    assert sum(r["c0_baseline_total"] for r in rows) == 2858


def test_cli_validates_the_suite():
    res = run_cli("tasks", "validate", "--suite", SUITE)
    assert res.returncode == 0, res.stderr
    assert f"{SUITE}: 44 task(s) ok" in res.stdout


@pytest.mark.skipif(not (DATA / "tasks.csv").is_file(), reason=f"the paper's run matrix is not at {DATA}")
def test_generated_files_are_up_to_date(tmp_path):
    """The committed specs are exactly what the generator writes from tasks.csv (no hand edits)."""
    generator = Path(__file__).resolve().parents[2] / "scripts" / "make_researchenvbench_suite.py"
    res = subprocess.run([sys.executable, str(generator), "--data", str(DATA), "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    bundled = Path(__file__).resolve().parents[2] / "tasks" / SUITE
    written = {p.relative_to(tmp_path): p.read_text() for p in tmp_path.rglob("task.toml")}
    assert written == {p.relative_to(bundled): p.read_text() for p in bundled.rglob("task.toml")}


def test_every_helper_is_used_by_a_stage_and_python_helpers_parse_on_old_pythons(tasks):
    """helpers/ are part of the probe toolbox: nothing in them is dead weight, and a Python helper
    runs under the agent's interpreter, which may be as old as 3.8 (3.8 grammar)."""
    import ast

    with_helpers = [t for t in tasks if (t.task_dir / "helpers").is_dir()]
    assert len(with_helpers) >= 20
    for task in with_helpers:
        stages = [getattr(task.stages, n) for n in ("cpu", "single_gpu", "multi_gpu")]
        used = " ".join(f"{s.command or ''} {s.env}" for s in stages)
        for path in sorted((task.task_dir / "helpers").rglob("*")):
            if path.is_dir() or path.name == "README.md" or "__pycache__" in path.parts:
                continue
            rel = path.relative_to(task.task_dir / "helpers").as_posix()
            # sitecustomize.py is imported by Python itself from a PYTHONPATH entry
            assert rel in used or (path.name == "sitecustomize.py" and "$REB_RAY_HELPERS" in used), (task.id, rel)
            if path.suffix == ".py":
                ast.parse(path.read_text(encoding="utf-8"), filename=str(path), feature_version=(3, 8))


def test_lmcache_follows_the_release_exit_0_on_sigint_and_states_no_deviation_of_it(tasks):
    """The release runs the starter under `timeout -s INT --preserve-status 8s` and requires exit 0
    (its SIGINT handler stops the engine and exits 0): a crash on SIGINT must fail, not pass as 124.
    (The stages' deviation is about the starter's config file only.)"""
    lmcache = {t.id: t for t in tasks}["lmcache--lmcache"]
    for name in ("cpu", "single_gpu", "multi_gpu"):
        stage = getattr(lmcache.stages, name)
        assert "timeout -s INT --preserve-status 8s python -m lmcache.v1.standalone" in stage.command, name
        assert "124" not in stage.command and stage.success.exit_code == 0, name
        assert not re.search(r"exit|SIGINT|timeout", stage.deviation or ""), name


def test_torchft_declares_its_lighthouse_log_on_every_stage(tasks):
    torchft = {t.id: t for t in tasks}["meta-pytorch--torchft"]
    for name in ("cpu", "single_gpu", "multi_gpu"):
        stage = getattr(torchft.stages, name)
        assert "> /tmp/reb-ray-lighthouse.log" in stage.command and stage.side_logs == ["/tmp/reb-ray-lighthouse.log"]


def test_every_stated_deviation_is_beside_an_applicable_command(tasks):
    for task in tasks:
        for name in ("cpu", "single_gpu", "multi_gpu"):
            stage = getattr(task.stages, name)
            assert stage.deviation is None or (stage.applicable and stage.deviation.strip()), (task.id, name)


@pytest.mark.skipif(not RELEASE.is_dir(), reason=f"the paper's release is not fetched at {RELEASE}")
def test_every_difference_from_the_release_scripts_is_documented():
    """scripts/compare_release.py against the release: each stage does what the release's script does
    or its deviation names what differs (exit 0, zero undocumented differences)."""
    script = Path(__file__).resolve().parents[2] / "scripts" / "compare_release.py"
    res = subprocess.run([sys.executable, str(script), str(RELEASE), "--json"], capture_output=True, text=True,
                         timeout=600)
    report = json.loads(res.stdout)
    undocumented = [(row["task"], row["stage"], d["text"]) for row in report["stages"]
                    for d in row["differences"] if not d["covered"]]
    assert res.returncode == 0 and undocumented == [], undocumented
    assert report["counts"]["stages"] == 132 and report["counts"]["missing_release"] == 0
