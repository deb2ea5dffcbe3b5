"""The per-node disk budget for kept environments: oldest first, never past the budget.

The Docker tests use tiny kept images made with `docker import` of a tar of random bytes (the
layer's size is the tar's content, so the sizes are known), labelled like kept environments of
one sweep of their own; every budget in them is applied to that sweep only, so kept images of
anyone else sharing the node are never counted or removed.
"""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
import uuid
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import pytest

from reb_ray.environment import keep
from reb_ray.environment.keep import KeptImage, parse_created, plan_eviction
from reb_ray.models.sweep import SweepConfig
from reb_ray.sandbox.ownership import ATTEMPT, KEPT_ENV, SWEEP, TRIAL

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _img(name: str, minutes: int, size: int | None) -> KeptImage:
    return KeptImage(id=f"sha256:{name}", tag=f"reb-ray/env:{name}", created=T0 + timedelta(minutes=minutes), layer_bytes=size)


def test_created_times_order_by_value_not_text():
    """Docker drops trailing zeros of the fraction: as text ".12345Z" sorts after ".123456789Z"."""
    short, long = parse_created("2026-12-02T03:41:16.12345Z"), parse_created("2026-12-02T03:41:16.123456789Z")
    assert short < long and "2026-12-02T03:41:16.12345Z" > "2026-12-02T03:41:16.123456789Z"
    assert parse_created("2026-12-02T03:41:16Z") < short
    assert parse_created("2026-12-02T05:41:16.5+02:00") == parse_created("2026-12-02T03:41:16.5Z")
    with pytest.raises(ValueError, match="'yesterday' is not RFC 3339"):
        parse_created("yesterday")


def test_plan_removes_oldest_until_the_rest_fits():
    a, b, c = _img("a", 0, 400), _img("b", 1, 300), _img("c", 2, 200)
    assert plan_eviction([c, a, b], 1000) == ([], [a, b, c])  # 900 fits
    assert plan_eviction([c, a, b], 600) == ([a], [b, c])  # 500 after the oldest goes
    assert plan_eviction([c, a, b], 499) == ([a, b], [c])
    assert plan_eviction([c, a, b], 0) == ([a, b, c], [])


def test_plan_removes_an_image_larger_than_the_budget_first():
    """The newest image alone is over the budget: it goes, the older ones that fit stay."""
    a, b, big = _img("a", 0, 100), _img("b", 1, 100), _img("big", 2, 5000)
    assert plan_eviction([a, b, big], 1000) == ([big], [a, b])
    # An image of unknown size counts 0 and is passed over, although the oldest.
    unknown = _img("u", -5, None)
    assert plan_eviction([unknown, a, b], 150) == ([a], [unknown, b])
    with pytest.raises(ValueError, match="-1 bytes: must be >= 0"):
        plan_eviction([a], -1)


# -- real Docker --------------------------------------------------------------------------------


@pytest.fixture
def tiny_kept(docker_client):
    """make(size_bytes, trial) imports a one-layer image of `size_bytes` random bytes labelled as
    a kept environment of this test's own sweep; all are removed at the end."""
    sweep = f"budget-test-{uuid.uuid4().hex[:8]}"
    made: list[str] = []

    def make(size: int, trial: str) -> str:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo("blob")
            info.size = size
            tar.addfile(info, io.BytesIO(os.urandom(size)))
        tag = f"{keep.KEPT_REPOSITORY}:{sweep}-{trial.replace('/', '_')}"
        changes = [f"LABEL {KEPT_ENV}=true", f"LABEL {SWEEP}={sweep}", f"LABEL {TRIAL}={trial}", f"LABEL {ATTEMPT}=1"]
        argv = ["docker", "import", *(x for c in changes for x in ("-c", c)), "-", tag]
        proc = subprocess.run(argv, input=buf.getvalue(), capture_output=True, check=True)
        made.append(proc.stdout.decode().strip())
        return made[-1]

    make.sweep = sweep
    yield make
    for image_id in made:
        subprocess.run(["docker", "rmi", "-f", image_id], capture_output=True)


def _ids(images) -> list[str]:
    return [i.id for i in images]


def test_budget_removes_the_oldest_kept_images(docker_client, tiny_kept):
    old, mid, new = tiny_kept(300_000, "heuristic/t/0"), tiny_kept(200_000, "heuristic/t/1"), tiny_kept(100_000, "noop/t/0")
    listed = keep.list_kept(docker_client, tiny_kept.sweep)
    assert _ids(listed) == [old, mid, new] and [i.layer_bytes for i in listed] == [300_000, 200_000, 100_000]
    assert listed[0].trial_id == "heuristic/t/0" and listed[0].attempt == "1"
    # 600 kB fit 650 kB: nothing goes.
    assert keep.apply_budget(docker_client, 650_000, tiny_kept.sweep).removed == []
    result = keep.apply_budget(docker_client, 350_000, tiny_kept.sweep)
    assert _ids(result.removed) == [old] and _ids(result.kept) == [mid, new] and result.kept_bytes == 300_000
    assert {i.id for i in keep.list_kept(docker_client, tiny_kept.sweep)} == {mid, new}
    # An image a container uses stays, reported; the budget is then over by it.
    container = docker_client.containers.create(mid, command="true")
    try:
        result = keep.apply_budget(docker_client, 150_000, tiny_kept.sweep)
        assert result.removed == [] and _ids(result.kept) == [new]
        assert [i.id for i, _ in result.failed] == [mid] and "conflict" in result.failed[0][1].lower()
        assert result.kept_bytes == 300_000
    finally:
        container.remove(force=True)


def test_env_gc_prints_what_it_removed_and_kept(docker_client, tiny_kept):
    from typer.testing import CliRunner

    from reb_ray.cli import app

    old, new = tiny_kept(2_000_000, "heuristic/a/0"), tiny_kept(1_000_000, "heuristic/b/0")
    budget_gib = 1.5e6 / 1024**3
    out = CliRunner().invoke(app, ["env", "gc", "--env-disk-budget-gb", f"{budget_gib:.9f}", "--sweep-id", tiny_kept.sweep])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert lines[0].startswith(f"removed reb-ray/env:{tiny_kept.sweep}-heuristic_a_0  2.0 MB  sweep {tiny_kept.sweep}  "
                               "trial heuristic/a/0  attempt 1  created ")
    assert lines[1].startswith(f"kept reb-ray/env:{tiny_kept.sweep}-heuristic_b_0  1.0 MB")
    assert lines[2] == "budget 1.5 MB: removed 1 image(s), 2.0 MB; kept 1, 1.0 MB"
    assert _ids(keep.list_kept(docker_client, tiny_kept.sweep)) == [new]
    bad = CliRunner().invoke(app, ["env", "gc", "--env-disk-budget-gb", "-1"])
    assert bad.exit_code != 0 and str(bad.exception) == "--env-disk-budget-gb -1.0: a budget is GiB >= 0"


def test_settle_applies_the_budget_after_a_keep(docker_client, tiny_kept, monkeypatch):
    """EnvironmentPhase.settle keeps a success's image, then applies the budget: older kept
    images go and are named in env_evicted; its own image, when larger than the whole budget,
    is not kept. (list_kept is held to this test's sweep: the node is shared.)"""
    from reb_ray.environment.phase import EnvironmentPhase
    from reb_ray.trial.result import StageRow
    from tests.test_repo_state import _recorder

    real_list = keep.list_kept
    monkeypatch.setattr(keep, "list_kept", lambda client, sweep_id=None, only=None: real_list(client, tiny_kept.sweep, only))

    def settle(image_id: str, budget: int) -> dict:
        rec = _recorder()
        rec.result.settlement.status, rec.stages = "scored", [StageRow(stage="c1", status="success")]
        config = SweepConfig(keep_environments="successes", env_disk_budget_bytes=budget)
        phase = EnvironmentPhase(rec, SimpleNamespace(config=config), [])
        phase.client, phase.image_id = docker_client, image_id
        rec.result.environment.set(env_image_id=image_id, env_image_tag="x", env_image_bytes=1, env_image_total_bytes=1)
        phase.settle()
        return dict(rec.row)

    old = tiny_kept(400_000, "heuristic/a/0")
    new = tiny_kept(300_000, "heuristic/b/0")
    row = settle(new, 500_000)
    assert row["env_kept"] is True and row["env_image_id"] == new
    assert row["env_evicted"] == [f"reb-ray/env:{tiny_kept.sweep}-heuristic_a_0"] and row["env_disk_budget_bytes"] == 500_000
    assert row["env_node_kept_bytes"] == 300_000 and row["env_keep_error"] is None
    assert _ids(keep.list_kept(docker_client, tiny_kept.sweep)) == [new] and old != new
    big = tiny_kept(900_000, "heuristic/c/0")
    row = settle(big, 500_000)
    assert row["env_kept"] is False and row["env_image_id"] is None and row["env_evicted"] == []
    assert row["env_keep_error"] == "not kept: its layer of 900 kB exceeds the node's env disk budget of 500 kB"
    assert _ids(keep.list_kept(docker_client, tiny_kept.sweep)) == [new]  # the big one gone, not the older


def test_trial_show_says_when_the_budget_removed_a_kept_image(tmp_path):
    """A kept image's row still says kept; the row of the attempt whose settle evicted it names
    its tag, and `trial show` reads that."""
    from analysis.trial_view import show_trial
    from reb_ray.testing import synthetic

    old_row, old_stages = synthetic.trial("heuristic", "t1", 0, "SSSS")
    new_row, new_stages = synthetic.trial("heuristic", "t2", 0, "SSSS")
    old_row.update(env_keep_policy="successes", env_kept=True, env_image_tag="reb-ray/env:old", env_image_id="sha256:ab",
                   env_manifest_path="m.json.gz", node="n1")
    new_row.update(env_keep_policy="successes", env_kept=True, env_image_tag="reb-ray/env:new", env_image_id="sha256:cd",
                   env_evicted=["reb-ray/env:old"], env_disk_budget_bytes=10**9, env_node_kept_bytes=6 * 10**8, node="n1")
    synthetic.write(tmp_path, [(old_row, old_stages), (new_row, new_stages)])
    shown = show_trial(tmp_path, "heuristic/t1/0")
    assert "kept as image reb-ray/env:old" in shown
    assert "; since removed by the node's disk budget (at heuristic/t2/0 attempt 1 of sweep syn)" in shown
    assert "since removed" not in show_trial(tmp_path, "heuristic/t2/0")


def test_gc_and_list_with_an_output_touch_only_the_images_its_rows_record(docker_client, tiny_kept, tmp_path):
    """Two users' sweeps of one configuration share a sweep id: `--output` narrows `env gc` and
    `env list` to the images the directory's own trials rows name, and the other user's stays."""
    from reb_ray.testing import synthetic
    from tests.cli.in_process import run_cli

    mine, theirs = tiny_kept(100_000, "heuristic/t/0"), tiny_kept(100_000, "heuristic/t/0-other")
    row, stages = synthetic.trial("heuristic", "t", 0, "SF--", sweep=tiny_kept.sweep)
    synthetic.write(tmp_path / "runs", [({**row, "env_image_id": mine}, stages)])

    listed = run_cli("env", "list", "--sweep-id", tiny_kept.sweep, "--output", str(tmp_path / "runs"))
    assert listed.returncode == 0 and len(listed.stdout.splitlines()) == 1, listed.stdout + listed.stderr
    assert "heuristic/t/0 " in listed.stdout
    done = run_cli("env", "gc", "--env-disk-budget-gb", "0", "--sweep-id", tiny_kept.sweep, "--output", str(tmp_path / "runs"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("removed reb-ray/env:") == 1 and "removed 1 image(s)" in done.stdout, done.stdout
    assert {i.id for i in keep.list_kept(docker_client, tiny_kept.sweep)} == {theirs}  # the other user's stays
    missing = run_cli("env", "gc", "--output", str(tmp_path / "nothing"))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1, missing.stderr
