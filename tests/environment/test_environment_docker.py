"""Environments as artifacts with real Docker on the demo suite: the heuristic's environment
for numpy-trainer is captured, kept, exported and rebuilt to the same verdicts; noop's
attempt keeps nothing under the default policy; the reaper leaves a kept image alone. The
heuristic and noop attempts are the environment tests' shared run (tests/environment/conftest.py:
`kept_heuristic`); a test that writes into an output writes into its own copy."""

from __future__ import annotations

import json
import re
import shutil
import uuid
import os

import pytest

from reb_ray.environment.export import export
from reb_ray.sweep.env_verify import verify
from reb_ray.models.sweep import SweepConfig
from reb_ray.results.parquet_sink import ParquetSink
from reb_ray.results.read import read_trials
from tests.environment.conftest import SWEEP, run_demo_trial
from tests.helpers.keep_default import product_default

pytestmark = pytest.mark.docker


@pytest.mark.timeout(900)  # the shared heuristic and noop trials, an export, a recipe that fails: minutes on a busy node
def test_heuristic_environment_is_captured_kept_and_exported(kept_heuristic, docker_client, tmp_path):
    """The shared run's heuristic success: its manifest, its kept image, its export (with the
    image). Its rebuild to the same verdicts is `--verify-exports`' test below; a recipe that
    fails to build is reported as such and leaves no image of a built step behind."""
    import gzip
    import hashlib

    from reb_ray.sandbox.docker.reaper import orphaned_images

    with product_default():  # the product keeps successes: the per-node disk budget bounds what is kept
        assert SweepConfig().output.keep_environments == "successes"
    out, heuristic, noop = kept_heuristic.out, kept_heuristic.heuristic, kept_heuristic.noop
    assert heuristic["status"] == "scored" and heuristic["c1_status"] == "success", heuristic["failure_reason"]
    # Capture: the manifest beside the artifacts, its digest that of the stored bytes.
    data = gzip.decompress((out / heuristic["env_manifest_path"]).read_bytes())
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
    assert heuristic["env_image_id"] not in {i.id for i in orphaned_images(docker_client)}
    # noop: committed, then removed (no command stage passed); its manifest still taken.
    assert noop["status"] == "scored" and noop["env_kept"] is False and noop["env_image_id"] is None
    assert noop["env_image_bytes"] is None and noop["env_image_total_bytes"] is None  # no such image now
    assert noop["env_manifest_digest"] and noop["env_commit_s"] is not None
    # Fingerprint columns in the row.
    assert heuristic["container_runtime"] == "docker" and heuristic["kernel"] == os.uname().release
    # Export, with the kept image itself.
    info = export(out, heuristic["trial_id"], tmp_path / "export", image=True)
    assert info["locked_hashed"] >= 1 and info["wheels"] == info["locked_hashed"]
    assert "numpy==" in (tmp_path / "export" / "requirements.lock").read_text()
    assert (tmp_path / "export" / "image.tar").stat().st_size > 0
    # A recipe that does not build is reported as such. It fails at its first RUN step: the
    # steps before it (the repository, the locks, the certificates) did build, each an untagged
    # image of the classic builder, and none of them is left behind.
    broken = tmp_path / "broken"
    shutil.copytree(tmp_path / "export", broken, ignore=shutil.ignore_patterns("image.tar"))
    dockerfile = broken / "Dockerfile"
    text, failing = dockerfile.read_text(), "RUN false\n"
    dockerfile.write_text(re.sub(r"^RUN ", failing + "RUN ", text, count=1, flags=re.M))
    assert dockerfile.read_text().count(failing) == 1
    dangling = set(docker_client.images.list(filters={"dangling": True}))
    steps: list[str] = []
    record = verify(broken, append=False, progress=steps.append)  # the shared output's dataset stays as the run left it
    assert record["built"] is False and record["verdict"].startswith("reproducible: not attempted"), record
    assert steps[0].startswith(f"building {broken / 'Dockerfile'} as reb-ray/env-verify:") and \
        steps[1].startswith("the build failed in "), steps
    assert len(re.findall(r"^ ---> [0-9a-f]{12}\s*$", record["build_error"], re.M)) >= 2  # FROM, then built steps
    assert set(docker_client.images.list(filters={"dangling": True})) <= dangling


def test_keep_none_commits_nothing(sandbox_image, tmp_path):
    row = run_demo_trial("noop", SweepConfig(output=tmp_path / "out", keep_environments="none"), sandbox_image)
    assert row["env_keep_policy"] == "none" and row.get("env_commit_s") is None and row["env_kept"] is False
    assert read_trials(tmp_path / "out").to_pylist()[0]["env_manifest_digest"] == row["env_manifest_digest"]


@pytest.mark.timeout(900)  # the shared heuristic trial, then a --no-cache rebuild and a probe phase: minutes on a busy node
def test_verify_exports_rebuilds_each_success_once_and_trial_show_says_so(kept_heuristic, tmp_path):
    """`--verify-exports`' work on a real heuristic success (a copy of the shared run's output):
    exported under the output, rebuilt to the same verdicts and packages, `reproducible: yes`
    in the dataset and in `trial show`; a second pass verifies nothing again; a success built on
    another node is recorded as not attempted."""
    from analysis.trial_view import show_trial
    from reb_ray.sweep.verify_exports import export_dir, verify_exports

    out = kept_heuristic.copy(tmp_path)
    row = kept_heuristic.heuristic
    assert row["c1_status"] == "success", row["failure_reason"]
    elsewhere = {**row, "trial_id": "heuristic/numpy-trainer/1", "trial_index": 1, "node": "gpu-node-7"}
    with ParquetSink(out, flush_interval_s=0) as sink:
        sink.write([elsewhere], [])
    lines: list[str] = []
    records = verify_exports(out, SWEEP, progress=lines.append)
    assert [r["trial_id"] for r in records] == ["heuristic/numpy-trainer/0", "heuristic/numpy-trainer/1"]
    mine, other = records
    assert mine["verdict"] == "reproducible: yes" and mine["built"], mine
    assert mine["packages_missing"] == [] and mine["packages_extra"] == []  # the same packages, rebuilt
    assert mine["export"] == str(export_dir(out, row)) and (export_dir(out, row) / "Dockerfile").is_file()
    assert 0 < mine["build_s"] and mine["source_agent_wall_time_s"] == row["agent_wall_time_s"]
    assert other["reproducible"] is None and "built on node gpu-node-7" in other["verdict"]
    assert lines[0].startswith("heuristic/numpy-trainer/0 attempt 1: reproducible: yes (rebuild ")
    dataset = [json.loads(l) for l in (out / "environments" / "verifications.jsonl").read_text().splitlines()]
    assert [(d["trial_id"], d["reproducible"]) for d in dataset] == [("heuristic/numpy-trainer/0", True),
                                                                      ("heuristic/numpy-trainer/1", None)]
    assert verify_exports(out, SWEEP) == []  # each attempt is verified once
    shown = show_trial(out, "heuristic/numpy-trainer/0")
    assert f"verify   reproducible: yes; rebuilt in {mine['build_s']:.1f} s (" in shown


def test_a_recipe_that_fails_to_build_leaves_no_container(docker_client, sandbox_image, tmp_path):
    from reb_ray.sweep.env_verify import build

    (tmp_path / "Dockerfile").write_text(f"FROM {sandbox_image}\nRUN false\n")
    exited = {"status": "exited", "ancestor": sandbox_image}
    before = {c.id for c in docker_client.containers.list(all=True, filters=exited)}
    built, _seconds, output = build(tmp_path, f"reb-ray/env-verify-test:{uuid.uuid4().hex[:8]}")
    assert built is False and "false" in output
    assert {c.id for c in docker_client.containers.list(all=True, filters=exited)} == before
