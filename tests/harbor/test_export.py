"""Writing reb-ray tasks as Harbor tasks: the files, the task.toml, the oracle script, the verifier's rules."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from reb_ray.harbor import verify_program
from reb_ray.harbor.export import export_task, solve_script, stage_spec
from reb_ray.suite.load import load_suite
from tests.cli.in_process import run_cli

DEMO = {task.id: task for task in load_suite("demo")}


@pytest.fixture
def toolbox(tmp_path):
    path = tmp_path / "toolbox.tar"
    path.write_bytes(b"stand-in: the verifier unpacks it only in a container")
    return path


def test_export_writes_the_harbor_layout(tmp_path, toolbox):
    task = DEMO["numpy-trainer"]
    done = export_task(task, tmp_path / "out", "my/base:1", toolbox)
    root = done.path
    assert root == tmp_path / "out" / "numpy-trainer"
    config = tomllib.loads((root / "task.toml").read_text())
    assert config["schema_version"] == "1.4"
    assert config["environment"]["gpus"] == 0 and config["environment"]["cpus"] == 1
    assert config["verifier"]["timeout_sec"] == task.stages.cpu.timeout_s + 900
    assert config["metadata"]["reb_ray_task"] == "numpy-trainer"
    assert (root / "environment" / "Dockerfile").read_text().splitlines()[0] == "FROM my/base:1"
    assert (root / "environment" / "repo" / "train.py").is_file()
    assert "/opt/scimlopsbench/report.json" in (root / "instruction.md").read_text()
    assert os.access(root / "tests" / "test.sh", os.X_OK)
    assert (root / "tests" / "helpers" / "tiny_config.py").is_file()
    assert os.path.samefile(root / "tests" / "toolbox.tar", toolbox)
    spec = json.loads((root / "tests" / "spec.json").read_text())
    assert list(spec["stages"]) == ["c1"] and spec["stages"]["c1"]["log_pattern"] == "final loss"
    assert done.has_solution and os.access(root / "solution" / "solve.sh", os.X_OK)


def test_the_prompt_never_shows_a_hidden_command(tmp_path, toolbox):
    task = DEMO["numpy-trainer"]
    root = export_task(task, tmp_path, "b", toolbox).path
    assert task.stages.cpu.command not in (root / "instruction.md").read_text()
    assert not (root / "environment" / "tiny_config.py").exists()


def test_gpus_come_from_the_stages():
    torch_tiny = DEMO["torch-tiny"]
    spec = stage_spec(torch_tiny)
    assert torch_tiny.gpus_needed >= 1
    assert all(stage["gpus"] <= torch_tiny.gpus_needed for stage in spec["stages"].values())


def test_solve_script_replays_the_recipe_in_order(tmp_path, slow_process):
    task = DEMO["numpy-trainer"]
    ca = tmp_path / "ca.pem"
    ca.write_text("pem")
    script = solve_script(task, ca)
    lines = script.splitlines()
    assert lines[0] == "#!/bin/bash" and "set -euo pipefail" in lines
    venv = next(i for i, line in enumerate(lines) if "-m venv /opt/envs/heuristic" in line)
    install = next(i for i, line in enumerate(lines) if "--require-hashes" in line)
    assert venv < install
    assert "cp /solution/certs/ca.pem /opt/reb-ray-env/certs/ca.pem" in script
    assert lines[-1] == "cp /solution/report.json /opt/scimlopsbench/report.json"
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0


def test_a_failed_export_leaves_nothing(tmp_path):
    with pytest.raises(OSError):
        export_task(DEMO["numpy-trainer"], tmp_path, "b", tmp_path / "no-such-toolbox.tar")
    assert not (tmp_path / "numpy-trainer").exists()


def test_unknown_format_is_one_line(tmp_path):
    result = run_cli("tasks", "export", str(tmp_path), "--format", "zip")
    assert result.returncode == 2
    assert result.stderr.strip() == "--format zip: unknown task format; valid: harbor"


def test_verifier_without_a_report_fails_every_stage(tmp_path, monkeypatch):
    tests_dir = tmp_path / "tests"
    tests_dir.mkdir()
    spec = stage_spec(DEMO["numpy-trainer"]) | {"report_path": str(tmp_path / "none.json")}
    (tests_dir / "spec.json").write_text(json.dumps(spec))
    monkeypatch.setattr(verify_program, "HERE", str(tests_dir))
    monkeypatch.setattr(verify_program, "VERIFIER_DIR", str(tmp_path / "verifier"))
    verify_program.main()
    rewards = json.loads((tmp_path / "verifier" / "reward.json").read_text())
    assert rewards == {"c0_missing_ratio": 1.0, "c1": 0, "reward": 0.0}
    verdicts = json.loads((tmp_path / "verifier" / "verdicts.json").read_text())
    assert verdicts["c1"]["reason"].startswith("missing_report")


def test_verifier_runs_a_stage_command_with_the_report_interpreter(tmp_path, slow_process):
    stage = {"command": "python -c 'import sys; print(sys.executable); print(\"final loss 1\")'", "env": {},
             "workdir": ".", "timeout_s": 60, "exit_code": 0, "log_pattern": "final loss"}
    passed, reason, tail = verify_program.run_command(stage, str(tmp_path), sys.executable, "", str(tmp_path))
    assert passed, reason
    assert tail.splitlines()[0] == sys.executable
    failing = stage | {"log_pattern": "never printed"}
    assert verify_program.run_command(failing, str(tmp_path), sys.executable, "", str(tmp_path))[:2] == \
        (False, "log pattern 'never printed' not found")


def test_missing_imports_counts_top_level_modules_once():
    diags = [{"rule": "reportMissingImports", "message": 'Import "torch.nn" could not be resolved'},
             {"rule": "reportMissingImports", "message": 'Import "torch" could not be resolved'},
             {"rule": "reportMissingImports", "message": 'Import ".local" could not be resolved'},
             {"rule": "reportMissingModuleSource", "message": 'Import "yaml" could not be resolved from source'}]
    assert verify_program.missing_imports({"pyright": {"generalDiagnostics": diags}}) == ["torch"]


def test_audit_counts_contradicted_claims():
    facts = {"python_runs": True, "python_version": "3.11.2", "torch_import_ok": False}
    honest = {"python_version": "3.11", "torch_version": None, "cuda_available": None, "gpu_count": 0}
    assert verify_program.audit(honest, facts, gpus=0) == []
    lying = {"python_version": "3.12.1", "torch_version": "2.3.0", "cuda_available": True, "gpu_count": 2}
    assert len(verify_program.audit(lying, facts, gpus=0)) == 4
    assert verify_program.audit(honest, {"python_runs": False}, gpus=0) == ["python_path: does not run"]
