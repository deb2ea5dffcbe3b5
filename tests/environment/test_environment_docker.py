"""Environments as artifacts with real Docker on the demo suite: the heuristic's environment
for numpy-trainer is captured, kept, exported and rebuilt to the same verdicts; noop's
attempt keeps nothing under the default policy; the reaper leaves a kept image alone."""

from __future__ import annotations

import gzip
import json
import uuid
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from reb_ray.environment.export import export
from reb_ray.sweep.env_verify import verify
from reb_ray.suite.load import load_suite
from reb_ray.models.sweep import SweepConfig, TrialSpec
from reb_ray.results.parquet_sink import ParquetSink
from reb_ray.results.read import read_trials
from reb_ray.trial import run_trial
from tests.helpers.keep_default import product_default

pytestmark = pytest.mark.docker


def _run(agent: str, config: SweepConfig, image: str) -> dict:
    task = next(t for t in load_suite("demo") if t.id == "numpy-trainer")
    outcome = run_trial(TrialSpec(sweep_id="envart", agent=agent, task=task, trial_index=0, config=config, image=image))
    with ParquetSink(config.output.dir, flush_interval_s=0) as sink:
        sink.write([outcome.trial], outcome.stages)
    return outcome.trial


@pytest.mark.timeout(900)  # a heuristic trial, a noop trial, an export and its rebuild: minutes on a busy node
def test_heuristic_environment_is_captured_kept_exported_and_rebuilt(sandbox_image, docker_client, tmp_path):
    with product_default():  # the product keeps successes: the per-node disk budget bounds what is kept
        assert SweepConfig().output.keep_environments == "successes"
    config = SweepConfig(output=tmp_path / "out", keep_environments="successes")
    with ThreadPoolExecutor(2) as pool:  # side by side, as a sweep runs two trials on this machine
        noop_run = pool.submit(_run, "noop", config, sandbox_image)
        heuristic = _run("heuristic", config, sandbox_image)
        noop = noop_run.result()
    try:
        assert heuristic["status"] == "scored" and heuristic["c1_status"] == "success", heuristic["failure_reason"]
        # Capture: the manifest beside the artifacts, its digest that of the stored bytes.
        data = gzip.decompress((config.output.dir / heuristic["env_manifest_path"]).read_bytes())
        import hashlib
        assert hashlib.sha256(data).hexdigest() == heuristic["env_manifest_digest"]
        assert len(data) == heuristic["env_manifest_bytes"] and heuristic["env_capture_s"] > 0
        manifest = json.loads(data)
        assert manifest["interpreter"]["prefix"] == "/opt/envs/heuristic" and manifest["interpreter"]["venv"]
        numpy = next(d for d in manifest["distributions"] if d["name"] == "numpy")
        assert numpy["source"] == {"kind": "index"} and numpy["installer"] == "pip"
        assert manifest["system_packages"] == {"added": {}, "removed": {}, "changed": {}}
        assert manifest["filesystem"]["groups"][0]["path"] == "/opt/envs/heuristic"
        cmds = manifest["commands"]["list"]
        assert manifest["commands"]["source"] == "agent_log" and any("pip install" in c["command"] for c in cmds)
        assert all(c["exit_code"] == 0 for c in cmds)
        # Keep: a success under `successes` keeps an image labelled with its attempt, without an owner.
        assert heuristic["env_keep_policy"] == "successes" and heuristic["env_kept"] is True
        image = docker_client.images.get(heuristic["env_image_id"])
        assert image.labels["reb-ray.env-kept"] == "true" and image.labels["reb-ray.trial"] == heuristic["trial_id"]
        assert image.labels["reb-ray.owner.pid"] == "" and heuristic["env_image_bytes"] > 10_000_000
        from reb_ray.sandbox.docker.reaper import orphaned_images
        assert heuristic["env_image_id"] not in {i.id for i in orphaned_images(docker_client)}
        # noop: committed, then removed (no command stage passed); its manifest still taken.
        assert noop["status"] == "scored" and noop["env_kept"] is False and noop["env_image_id"] is None
        assert noop["env_image_bytes"] is None and noop["env_image_total_bytes"] is None  # no such image now
        assert noop["env_manifest_digest"] and noop["env_commit_s"] is not None
        # Fingerprint columns in the row.
        assert heuristic["container_runtime"] == "docker" and heuristic["kernel"] == os.uname().release
        # Export, then verify by rebuilding.
        info = export(config.output.dir, heuristic["trial_id"], tmp_path / "export", image=True)
        assert info["locked_hashed"] >= 1 and info["wheels"] == info["locked_hashed"]
        assert "numpy==" in (tmp_path / "export" / "requirements.lock").read_text()
        assert (tmp_path / "export" / "image.tar").stat().st_size > 0
        record = verify(tmp_path / "export")
        assert record["built"] and record["verdict"] == "reproducible: yes", record
        assert record["packages_missing"] == [] and record["packages_extra"] == []
        assert json.loads((config.output.dir / "environments" / "verifications.jsonl").read_text().splitlines()[-1])["reproducible"]
        # A recipe that does not build is reported as such.
        dockerfile = tmp_path / "export" / "Dockerfile"
        dockerfile.write_text(dockerfile.read_text() + "RUN false\n")
        dangling = set(docker_client.images.list(filters={"dangling": True}))
        broken = verify(tmp_path / "export")
        assert broken["built"] is False and broken["verdict"].startswith("reproducible: not attempted")
        # The steps that did build (the interpreter, the wheels: ~1 GB) leave no untagged image behind.
        assert set(docker_client.images.list(filters={"dangling": True})) <= dangling
    finally:
        if heuristic.get("env_image_id"):
            subprocess.run(["docker", "rmi", "-f", heuristic["env_image_id"]], capture_output=True)


def test_keep_none_commits_nothing(sandbox_image, tmp_path):
    row = _run("noop", SweepConfig(output=tmp_path / "out", keep_environments="none"), sandbox_image)
    assert row["env_keep_policy"] == "none" and row.get("env_commit_s") is None and row["env_kept"] is False
    assert read_trials(tmp_path / "out").to_pylist()[0]["env_manifest_digest"] == row["env_manifest_digest"]


@pytest.mark.timeout(900)  # a heuristic trial, then a --no-cache rebuild and a probe phase: minutes on a busy node
def test_verify_exports_rebuilds_each_success_once_and_trial_show_says_so(sandbox_image, docker_client, tmp_path):
    """`--verify-exports`' work on a real heuristic success: exported under the output,
    rebuilt, `reproducible: yes` in the dataset and in `trial show`; a second pass verifies
    nothing again; a success built on another node is recorded as not attempted."""
    from analysis.trial_view import show_trial
    from reb_ray.sweep.verify_exports import export_dir, verify_exports

    config = SweepConfig(output=tmp_path / "out", keep_environments="none")
    row = _run("heuristic", config, sandbox_image)
    assert row["c1_status"] == "success", row["failure_reason"]
    elsewhere = {**row, "trial_id": "heuristic/numpy-trainer/1", "trial_index": 1, "node": "gpu-node-7"}
    with ParquetSink(config.output.dir, flush_interval_s=0) as sink:
        sink.write([elsewhere], [])
    lines: list[str] = []
    records = verify_exports(config.output.dir, "envart", progress=lines.append)
    assert [r["trial_id"] for r in records] == ["heuristic/numpy-trainer/0", "heuristic/numpy-trainer/1"]
    mine, other = records
    assert mine["verdict"] == "reproducible: yes" and mine["built"], mine
    assert mine["export"] == str(export_dir(config.output.dir, row)) and (export_dir(config.output.dir, row) / "Dockerfile").is_file()
    assert 0 < mine["build_s"] and mine["source_agent_wall_time_s"] == row["agent_wall_time_s"]
    assert other["reproducible"] is None and "built on node gpu-node-7" in other["verdict"]
    assert lines[0].startswith("heuristic/numpy-trainer/0 attempt 1: reproducible: yes (rebuild ")
    dataset = [json.loads(l) for l in (config.output.dir / "environments" / "verifications.jsonl").read_text().splitlines()]
    assert [(d["trial_id"], d["reproducible"]) for d in dataset] == [("heuristic/numpy-trainer/0", True),
                                                                      ("heuristic/numpy-trainer/1", None)]
    assert verify_exports(config.output.dir, "envart") == []  # each attempt is verified once
    shown = show_trial(config.output.dir, "heuristic/numpy-trainer/0")
    assert f"verify   reproducible: yes; rebuilt in {mine['build_s']:.1f} s (" in shown


def test_a_recipe_that_fails_to_build_leaves_no_container(docker_client, sandbox_image, tmp_path):
    from reb_ray.sweep.env_verify import build

    (tmp_path / "Dockerfile").write_text(f"FROM {sandbox_image}\nRUN false\n")
    exited = {"status": "exited", "ancestor": sandbox_image}
    before = {c.id for c in docker_client.containers.list(all=True, filters=exited)}
    built, _seconds, output = build(tmp_path, f"reb-ray/env-verify-test:{uuid.uuid4().hex[:8]}")
    assert built is False and "false" in output
    assert {c.id for c in docker_client.containers.list(all=True, filters=exited)} == before
