"""`reb-ray regrade --rerun-probes` with real Docker on the demo suite: the heuristic's kept
environment for numpy-trainer is probed again, with no agent, and gives the same stage
verdicts; a re-probe under another probe toolbox records which toolbox graded it; a trial whose
image was removed is reported as gone, in one line, and counted. The tests share one heuristic
trial (a minute of agent work) and run in file order: the last one removes its image."""

from __future__ import annotations

import pytest

from reb_ray.models.sweep import SweepConfig, TrialSpec
from reb_ray.results.parquet_sink import ParquetSink
from reb_ray.results.read import read_stages, read_trials
from reb_ray.suite.load import load_suite
from reb_ray.sweep.reprobe import PROBE_ROWS, reprobe
from reb_ray.trial import run_trial
from tests.cli.in_process import run_cli

pytestmark = pytest.mark.docker

SWEEP = "rp"
TRIAL = "heuristic/numpy-trainer/0"
#: What a stage's verdict is: these must come out the same from the kept image.
VERDICT = ("status", "failure_category", "reason", "witness_status")


@pytest.fixture(scope="module")
def kept(sandbox_image, docker_client, tmp_path_factory):
    """A sweep output holding the heuristic's scored success on numpy-trainer, its environment kept."""
    out = tmp_path_factory.mktemp("reprobe") / "out"
    config = SweepConfig(output=out, keep_environments="successes")
    task = next(t for t in load_suite("demo") if t.id == "numpy-trainer")
    outcome = run_trial(TrialSpec(sweep_id=SWEEP, agent="heuristic", task=task, trial_index=0, config=config,
                                  image=sandbox_image))
    with ParquetSink(out, flush_interval_s=0) as sink:
        sink.write([outcome.trial], outcome.stages)
    row = outcome.trial
    assert row["status"] == "scored" and row["c1_status"] == "success" and row["env_kept"], row["failure_reason"]
    yield out, row
    try:
        docker_client.images.remove(row["env_image_id"], force=True)
    except Exception:  # noqa: BLE001 - the last test removed it already
        pass


def _containers(docker_client, sweep: str) -> list:
    return docker_client.containers.list(all=True, filters={"label": f"reb-ray.sweep={sweep}"})


def _verdicts(out, sweep: str) -> dict[str, tuple]:
    return {s["stage"]: tuple(s[k] for k in VERDICT) for s in read_stages(out, sweep).to_pylist() if s["stage"] in PROBE_ROWS}


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
    stages = {s["stage"]: s for s in read_stages(out, f"{SWEEP}-reprobe").to_pylist()}
    assert stages["agent"]["log_path"] == next(s for s in read_stages(out, SWEEP).to_pylist() if s["stage"] == "agent")["log_path"]
    assert stages["c1"]["log_path"].startswith("artifacts/sweep_id=rp-reprobe/") and (out / stages["c1"]["log_path"]).is_file()
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
def test_a_removed_image_is_reported_gone(kept, docker_client):
    out, source = kept
    before = read_trials(out, f"{SWEEP}-reprobe").num_rows
    docker_client.images.remove(source["env_image_id"], force=True)
    res = run_cli("regrade", str(out), "--rerun-probes", "--sweep-id", SWEEP)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[0] == (f"{TRIAL} attempt 1 of {SWEEP}: not re-probed: its kept image "
                                          f"{source['env_image_tag']} is gone from this node")
    assert "1 trial(s) not re-probed: no kept image on this node" in res.stdout
    assert "re-probed 0 trial(s)" in res.stdout
    assert read_trials(out, f"{SWEEP}-reprobe").num_rows == before  # nothing written for it
    assert _containers(docker_client, f"{SWEEP}-reprobe") == []
