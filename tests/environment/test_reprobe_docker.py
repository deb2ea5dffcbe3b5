"""`reb-ray regrade --rerun-probes` with real Docker on the demo suite: the heuristic's kept
environment for numpy-trainer is probed again, with no agent, and gives the same stage
verdicts; a re-probe under another probe toolbox records which toolbox graded it; a trial whose
image was removed is reported as gone, in one line, and counted. The heuristic attempt is the
environment tests' shared run (tests/environment/conftest.py: `kept_heuristic`), re-probed in
this module's copy of its output, in file order; the test of a removed image removes an image
of its own (a noop attempt kept under `scored`), never the shared one."""

from __future__ import annotations

import pytest

from reb_ray.models.sweep import SweepConfig
from reb_ray.results.read import read_stages, read_trials
from reb_ray.sweep.reprobe import PROBE_ROWS, reprobe
from tests.cli.in_process import run_cli
from tests.environment.conftest import SWEEP, run_demo_trial

pytestmark = pytest.mark.docker

TRIAL = "heuristic/numpy-trainer/0"
#: What a stage's verdict is: these must come out the same from the kept image.
VERDICT = ("status", "failure_category", "reason", "witness_status")


@pytest.fixture(scope="module")
def kept(kept_heuristic, tmp_path_factory):
    """A sweep output holding the heuristic's scored success on numpy-trainer, its environment
    kept: this module's copy of the shared run's output (the re-probes write into it)."""
    out = kept_heuristic.copy(tmp_path_factory.mktemp("reprobe"))
    row = kept_heuristic.heuristic
    assert row["status"] == "scored" and row["c1_status"] == "success" and row["env_kept"], row["failure_reason"]
    return out, row


def _containers(docker_client, sweep: str) -> list:
    return docker_client.containers.list(all=True, filters={"label": f"reb-ray.sweep={sweep}"})


def _stages(out, sweep: str) -> dict[str, dict]:
    """The heuristic attempt's stages in `sweep` (the shared run's output also holds noop's)."""
    return {s["stage"]: s for s in read_stages(out, sweep).to_pylist() if s["trial_id"] == TRIAL}


def _verdicts(out, sweep: str) -> dict[str, tuple]:
    return {name: tuple(s[k] for k in VERDICT) for name, s in _stages(out, sweep).items() if name in PROBE_ROWS}


@pytest.mark.timeout(900)
def test_rerun_probes_reproduces_the_stage_verdicts(kept, docker_client):
    out, source = kept
    res = run_cli("regrade", str(out), "--rerun-probes", "--trials", TRIAL)
    assert res.returncode == 0, res.stderr
    line = res.stdout.splitlines()[0]
    assert line.startswith(f"{TRIAL} attempt 1 of {SWEEP}: same verdicts; toolbox {source['probe_toolbox']} (same); "
                           "probe phase "), line
    assert f"re-probed 1 trial(s) into sweep(s) {SWEEP}-reprobe" in res.stdout
    new = read_trials(out, f"{SWEEP}-reprobe").to_pylist()
    assert len(new) == 1
    row = new[0]
    # A new grading of the same attempt: its identity, its agent phase, today's probes.
    assert (row["trial_id"], row["attempt"], row["reused_from"]) == (TRIAL, 1, SWEEP)
    assert row["probe_toolbox"] == source["probe_toolbox"] and len(row["probe_toolbox"]) == 16
    assert row["agent_wall_time_s"] == source["agent_wall_time_s"] and row["env_image_id"] == source["env_image_id"]
    assert row["probe_wall_time_s"] > 0 and row["finished_at"] > source["finished_at"]
    # Every verdict as the trial's own probe phase gave it, on the stages and on the row.
    assert _verdicts(out, f"{SWEEP}-reprobe") == _verdicts(out, SWEEP)
    for column in ("status", "failure_owner", "c0_status", "c0_missing", "c1_status", "c1_exit_code", "c1_witness",
                   "c2_status", "c5_status", "c5_path", "c5_version", "python_path_kind", "env_size_status", "env_size_bytes"):
        assert row[column] == source[column], column
    stages = _stages(out, f"{SWEEP}-reprobe")
    assert stages["agent"]["log_path"] == _stages(out, SWEEP)["agent"]["log_path"]
    assert stages["c1"]["log_path"].startswith(f"artifacts/sweep_id={SWEEP}-reprobe/") and (out / stages["c1"]["log_path"]).is_file()
    assert _containers(docker_client, f"{SWEEP}-reprobe") == []  # its sandbox is gone
    # `trial show` finds the latest grading without --sweep-id and lists both.
    shown = run_cli("trial", "show", str(out), TRIAL).stdout
    assert f"trial {TRIAL} of sweep {SWEEP}-reprobe" in shown and "gradings of attempt 1 (2," in shown
    assert f"  {SWEEP} (the run's own; toolbox {source['probe_toolbox']}): c0 success c1 success" in shown
    assert "same verdicts  <- shown" in shown


@pytest.mark.timeout(900)
def test_a_reprobe_under_another_toolbox_records_it(kept, monkeypatch, tmp_path):
    """A changed probe toolbox (here its layout version, as a fixed probe changes its bytes):
    the new grading names the toolbox that made it, the line says it changed."""
    from reb_ray.probing import toolbox

    out, source = kept
    monkeypatch.setenv("REB_RAY_CACHE_DIR", str(tmp_path / "cache"))  # the other toolbox is built apart
    monkeypatch.setattr(toolbox, "TOOLBOX_LAYOUT", toolbox.TOOLBOX_LAYOUT + "-test")
    lines: list[str] = []
    result = reprobe(out, SWEEP, [TRIAL], progress=lines.append)
    (item,) = result.reprobed
    new = item.outcome.trial
    assert new["probe_toolbox"] != source["probe_toolbox"] and new["probe_toolbox"] == toolbox.toolbox_key(toolbox.toolbox_sources())
    assert f"toolbox {source['probe_toolbox']} -> {new['probe_toolbox']}" in lines[0] and "same verdicts" in lines[0]
    assert new["c1_status"] == "success" and new["reused_from"] == SWEEP


@pytest.mark.timeout(300)
def test_a_removed_image_is_reported_gone(sandbox_image, docker_client, tmp_path):
    """An attempt of its own (noop, kept under `scored`: no agent work), its image removed."""
    out, sweep, trial = tmp_path / "out", "rpgone", "noop/numpy-trainer/0"
    source = run_demo_trial("noop", SweepConfig(output=out, keep_environments="scored"), sandbox_image, sweep_id=sweep)
    assert source["status"] == "scored" and source["env_kept"], source["failure_reason"]
    docker_client.images.remove(source["env_image_id"], force=True)
    res = run_cli("regrade", str(out), "--rerun-probes", "--sweep-id", sweep)
    # Nothing re-probed: exit code 3 (reb_ray.cli.exits), the last line counting the trial.
    assert res.returncode == 3, res.stdout + res.stderr
    assert res.stdout.splitlines()[-1] == "incomplete: 1 trial(s) left undone (1 no kept image); exit code 3", res.stdout
    assert res.stdout.splitlines()[0] == (f"{trial} attempt 1 of {sweep}: not re-probed: its kept image "
                                          f"{source['env_image_tag']} is gone from this node")
    assert "1 trial(s) not re-probed: no kept image on this node" in res.stdout
    assert "re-probed 0 trial(s)" in res.stdout
    assert {r["sweep_id"] for r in read_trials(out).to_pylist()} == {sweep}  # nothing written for it
    assert _containers(docker_client, f"{sweep}-reprobe") == []
