"""The pure parts of `reb-ray regrade --rerun-probes` (reb_ray/sweep/reprobe.py): which trials
it takes, the settings it probes under, why a trial has no image to start from, the verdict
comparison, and `trial show`'s gradings; no Docker (tests/environment/test_reprobe_docker.py
runs it on a real kept image)."""

from __future__ import annotations

import json

import pytest

from analysis.trial_view import show_trial
from reb_ray.errors import RebRayError
from reb_ray.sweep.identity import identity_path
from reb_ray.grading.verdict import differences
from reb_ray.sweep.reprobe import _no_image, reprobe_config, source_trials, stored_identity
from tests.analysis.runs import row, write_run
from tests.cli.in_process import run_cli


def test_only_current_scored_attempts_of_source_sweeps_are_taken(tmp_path):
    write_run(tmp_path, [
        row("a", "t1", 1, "scored", sweep="s"), row("a", "t1", 2, "infra_error", sweep="s"),  # attempt 1 counts
        row("a", "t2", 1, "infra_error", sweep="s"),  # nothing scored: nothing to re-probe
        row("a", "t1", 1, "scored", sweep="s-regrade"), row("a", "t1", 1, "scored", sweep="s-reprobe"),
        row("b", "t1", 1, "scored", sweep="s"),
    ])
    picked = source_trials(tmp_path)
    assert [(r["sweep_id"], r["trial_id"], r["attempt"]) for r in picked] == [("s", "a/t1/0", 1), ("s", "b/t1/0", 1)]
    assert [r["trial_id"] for r in source_trials(tmp_path, trial_ids=["b/t1/0"])] == ["b/t1/0"]
    assert [r["sweep_id"] for r in source_trials(tmp_path, "s-reprobe")] == ["s-reprobe"]  # named: taken
    with pytest.raises(RebRayError, match=r"no scored trial 'a/t2/0' to re-probe"):
        source_trials(tmp_path, trial_ids=["a/t2/0", "b/t1/0"])
    with pytest.raises(RebRayError, match="no scored trials of sweep 'x'"):
        source_trials(tmp_path, "x")


def test_config_takes_the_sweeps_identity_then_the_rows_limits(tmp_path):
    path = identity_path(tmp_path, "s")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"identity": {"cpus_per_trial": 2.5, "pids_limit": 100, "c4_cpu_gloo": True,
                                             "network_policy": "registries", "probes": "abc"}}))
    identity = stored_identity(tmp_path, "s")
    source = row("a", "t1", 1, "scored", sweep="s", sandbox_pids_limit=512, sandbox_shm_bytes=2**30,
                 network_policy="open", sandbox_provider="docker")
    config = reprobe_config(source, identity, tmp_path, None)
    assert (config.sandbox.cpus_per_trial, config.sandbox.c4_cpu_gloo) == (2.5, True)  # from the identity
    assert (config.sandbox.pids_limit, config.sandbox.shm_size_bytes, config.network.policy) == (512, 2**30, "open")  # the row's own
    assert config.output.keep_environments == "none" and config.output.dir == tmp_path
    assert stored_identity(tmp_path, "missing") == {}


def test_why_a_trial_has_no_image():
    kept = row("a", "t1", 1, "scored", sandbox_provider="docker", env_kept=True, env_image_id="sha256:1")
    assert _no_image(kept) is None
    assert "was not kept (env_kept False, policy successes)" in _no_image(dict(kept, env_kept=False, env_keep_policy="successes"))
    assert "provider 'local' keeps no images" in _no_image(dict(kept, sandbox_provider="local"))


def test_differences_name_each_stage_that_changed():
    before = {"c0_status": "success", "c1_status": "failure", "c2_status": "skipped"}
    after = {"c0_status": "success", "c1_status": "success", "c2_status": "skipped"}
    assert differences(before, after) == ["c1: failure -> success"]
    assert differences(before, before) == []


def test_trial_show_lists_every_grading_and_picks_the_latest(tmp_path):
    common = dict(c0_status="success", c2_status="skipped", c5_status="success", report_status="ok")
    write_run(tmp_path, [
        row("a", "t1", 1, "scored", sweep="s", c1_status="failure", probe_toolbox="aaaa", **common),
        row("a", "t1", 1, "scored", sweep="s-reprobe", c1_status="success", probe_toolbox="bbbb", reused_from="s", **common),
    ])
    shown = show_trial(tmp_path, "a/t1/0")  # in two sweeps, one a re-probe of the other: no --sweep-id needed
    assert shown.startswith("trial a/t1/0 of sweep s-reprobe: attempt 1")
    assert "  s (the run's own; toolbox aaaa): c0 success c1 failure c2 skipped" in shown
    line = next(l for l in shown.splitlines() if l.startswith("  s-reprobe (re-probed"))
    assert "toolbox bbbb" in line and "changed c1: failure -> success" in line and line.endswith("<- shown")
    original = show_trial(tmp_path, "a/t1/0", sweep_id="s")
    assert "gradings of attempt 1 (2," in original
    assert next(l for l in original.splitlines() if l.startswith("  s (the run's own")).endswith("<- shown")


def test_rerun_probe_options_need_the_flag(tmp_path):
    write_run(tmp_path, [row("a", "t1", 1, "scored")])
    for option, value in (("--trials", "a/t1/0"), ("--address", "auto")):
        res = run_cli("regrade", str(tmp_path), option, value)
        assert res.returncode == 2 and "--trials, --assets, --gpus and --address go with --rerun-probes" in res.stderr


def test_the_stored_report_is_read_under_todays_rules():
    """The report row's raw JSON is parsed again: a path today's contract refuses makes the
    report invalid (the agent's), and a report with no raw bytes keeps its stored verdict."""
    from types import SimpleNamespace

    from reb_ray.sweep.reprobe import _report
    from reb_ray.trial.result import AttemptResult, BetweenPhasesResult, StageRow

    def recorder(raw):
        stage = {"stage": "report", "status": "success", "reason": None, "failure_category": None, "raw": raw}
        stored = AttemptResult(between=BetweenPhasesResult(report_status="ok"))  # as carried from the source row
        return SimpleNamespace(result=stored, stages=[StageRow(**stage)]), stage

    def columns(rec):
        return rec.result.between.report_status, rec.result.between.report_python_path

    rec, stage = recorder(json.dumps({"python_path": "/opt/env/bin/python", "notes": "x"}))
    report = _report(rec, stage)
    assert report.python_path == "/opt/env/bin/python" and report.written["notes"] == "x"
    assert columns(rec) == ("ok", "/opt/env/bin/python")
    rec, stage = recorder(json.dumps({"python_path": "bin/python"}))  # relative: no usable path
    assert _report(rec, stage) is None
    assert columns(rec)[0] == "invalid_report" and rec.stages[0].failure_category == "invalid_report"
    rec, stage = recorder(None)
    assert _report(rec, dict(stage, status="failure")) is None and columns(rec) == ("ok", None)


def test_a_reprobe_row_is_the_source_with_what_it_measured_again():
    """The re-probe's own columns replace the source's (a stage it did not grade is null, not
    the source's verdict); the agent phase's columns stay the source's."""
    from reb_ray.sweep.reprobe import REPROBED_COLUMNS, reprobe_row

    source = {"sweep_id": "s1", "trial_id": "a/t/0", "agent_exit_code": 0, "c3_witness": "valid", "c1_status": "success",
              "report_status": "ok", "gpu_count": 8, "reused_from": None}
    fresh = {"sweep_id": "s1-reprobe", "c1_status": "failure", "report_status": "invalid_report", "gpu_count": 0,
             "agent_exit_code": 3}  # the fresh recorder's own agent columns are never measured: not taken
    row = reprobe_row(source, fresh)
    assert {"c3_witness", "c1_status", "report_status", "gpu_count", "sweep_id"} <= set(REPROBED_COLUMNS)
    assert "agent_exit_code" not in REPROBED_COLUMNS
    assert row["c3_witness"] is None and row["c1_status"] == "failure" and row["report_status"] == "invalid_report"
    assert row["gpu_count"] == 0 and row["sweep_id"] == "s1-reprobe" and row["reused_from"] == "s1"
    assert row["agent_exit_code"] == 0 and row["trial_id"] == "a/t/0"


def test_a_regraded_trial_is_shown_and_exported_from_its_source_without_naming_a_sweep(tmp_path):
    """`reb-ray regrade` writes the same trial under `<sweep>-regrade`: trial show and env export
    take the source (its logs, its environment); two unrelated sweeps still need --sweep-id."""
    from reb_ray.environment.export import find_attempt

    common = dict(c0_status="success", c2_status="skipped", c5_status="success", report_status="ok")
    write_run(tmp_path, [
        row("a", "t1", 1, "scored", sweep="s", c1_status="success", **common),
        row("a", "t1", 1, "scored", sweep="s-regrade", c1_status="failure", reused_from="s", **common),
        row("a", "t2", 1, "scored", sweep="s", **common), row("a", "t2", 1, "scored", sweep="other", **common),
    ])
    assert show_trial(tmp_path, "a/t1/0").startswith("trial a/t1/0 of sweep s: attempt 1")
    assert find_attempt(tmp_path, "a/t1/0")["sweep_id"] == "s"
    assert find_attempt(tmp_path, "a/t1/0", sweep_id="s-regrade")["sweep_id"] == "s-regrade"
    with pytest.raises(RebRayError, match="in sweeps other, s: choose one with --sweep-id"):
        show_trial(tmp_path, "a/t2/0")
    with pytest.raises(RebRayError, match="in sweeps other, s: name one with --sweep-id"):
        find_attempt(tmp_path, "a/t2/0")


def test_a_trial_a_later_sweep_reused_is_shown_and_exported_from_the_sweep_that_ran_it(tmp_path):
    """The README's second sweep reuses the demo sweep's scored numpy-trainer trial: its row
    there names the source in `reused_from`, so `trial show` and `env export` need no
    --sweep-id; a later sweep that ran the trial itself still does."""
    from reb_ray.environment.export import find_attempt

    common = dict(c0_status="success", c2_status="skipped", c5_status="success", report_status="ok")
    write_run(tmp_path, [
        row("a", "t1", 1, "scored", sweep="demo", c1_status="success", **common),
        row("a", "t1", 1, "scored", sweep="later", c1_status="success", reused_from="demo", **common),
        row("a", "t1", 1, "scored", sweep="later-regrade", c1_status="failure", reused_from="later", **common),
        row("a", "t2", 1, "scored", sweep="demo", **common),
        row("a", "t2", 1, "infra_error", sweep="later", **common),
        row("a", "t2", 2, "scored", sweep="later", reused_from="demo", **common),
    ])
    assert show_trial(tmp_path, "a/t1/0").startswith("trial a/t1/0 of sweep demo: attempt 1")
    assert find_attempt(tmp_path, "a/t1/0")["sweep_id"] == "demo"
    assert show_trial(tmp_path, "a/t1/0", sweep_id="later").startswith("trial a/t1/0 of sweep later:")
    with pytest.raises(RebRayError, match="in sweeps demo, later: choose one with --sweep-id"):
        show_trial(tmp_path, "a/t2/0")  # `later` ran an attempt of its own
    with pytest.raises(RebRayError, match="in sweeps demo, later: name one with --sweep-id"):
        find_attempt(tmp_path, "a/t2/0")


def test_a_reprobe_gets_the_named_gpus_or_as_many_of_the_nodes_as_the_source_had():
    from reb_ray.sweep.reprobe import gpus_for

    node = ["0", "1", "2", "3"]
    assert gpus_for({"gpus_assigned": 2}, None, node) == ["0", "1"]
    assert gpus_for({"gpus_assigned": None}, None, node) == []  # a CPU attempt (unknown count) gets none
    assert gpus_for({"gpus_assigned": 2}, ["3"], node) == ["3"]  # the user's choice wins
    assert gpus_for({"gpus_assigned": 8}, None, node) == node  # never more than the node has
