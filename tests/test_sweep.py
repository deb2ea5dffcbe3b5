"""End-to-end demo sweeps: real Docker, real Ray, real pyright, real Parquet.

The demo sweep is the one the test process shares (tests/helpers/shared_runs.py), and the
scripted agents on numpy-trainer run as one sweep for the module (`scripted`): each test reads
its own rows. A test whose subject is a sweep-wide setting (a retry limit, a suite, a flag) runs
a sweep of its own."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.compute as pc
import pytest

from reb_ray.models.sweep import SweepConfig
from reb_ray.results.read import read_stages, read_trials
from reb_ray.sandbox.ownership import MANAGED, SWEEP
from reb_ray.testing.suite import off, write_task

# Expected per (agent, task): (c0_missing, c1_status). noop reports the bare image python.
# pyright ships stubs for yaml, so a missing PyYAML is reportMissingModuleSource, not C0.
EXPECTED = {
    ("noop", "numpy-trainer"): (1, "failure"),
    ("noop", "import-name-mismatch"): (1, "failure"),
    ("noop", "pyproject-extra"): (2, "failure"),
    ("noop", "torch-tiny"): (1, "failure"),
    ("heuristic", "numpy-trainer"): (0, "success"),
    ("heuristic", "import-name-mismatch"): (0, "success"),
    ("heuristic", "pyproject-extra"): (0, "success"),
    ("heuristic", "torch-tiny"): (0, "success"),
}


def _unique() -> str:
    """A sweep id no other sweep on this machine uses (container labels are machine-wide)."""
    import uuid

    return f"test-{uuid.uuid4().hex[:8]}"


def _rows(output: Path) -> list[dict]:
    return read_trials(output).to_pylist()


def _our_containers(docker_client, sweep_id: str) -> list:
    return docker_client.containers.list(all=True, filters={"label": [f"{MANAGED}=true", f"{SWEEP}={sweep_id}"]})


@pytest.mark.timeout(600)  # the first test of a run to ask for it runs the shared demo sweep
def test_demo_sweep_end_to_end_and_resume(tmp_path, docker_client, demo_sweep, ray_local):
    """The demo sweep (tests/helpers/shared_runs.py: run once, read by other files too): every
    trial's verdicts, then a resume and a re-grade on a copy of its output."""
    from reb_ray.sweep.run import run_sweep

    result, output = demo_sweep.result, demo_sweep.output
    rows = _rows(output)
    assert len(rows) == 8 and result.attempts == 8
    by_key = {(r["agent"], r["task_id"]): r for r in rows}
    for key, (c0_missing, c1_status) in EXPECTED.items():
        row = by_key[key]
        assert row["status"] == "scored", (key, row["failure_reason"])
        assert (row["c0_missing"], row["c1_status"]) == (c0_missing, c1_status), (key, row["c0_missing_modules"], row["failure_reason"])
        assert row["c0_status"] == ("success" if c0_missing == 0 else "failure")
        assert row["report_status"] == "ok" and row["agent_wall_time_s"] > 0
        assert row["env_size_bytes"] > 0 and row["env_size_apparent_bytes"] >= row["env_size_bytes"]
        assert row["pyright_version"]
        assert (row["c3_status"], row["c4_status"]) == ("skipped", "skipped")
        assert row["c5_status"] == "success" and (row["c5_path"], row["c5_version"], row["c5_capability"]) == (0, 0, 0)
        assert row["repo_modified"] is False
        assert row["sandbox_shm_bytes"] == 16 * 1024**3  # F09: a large /dev/shm, recorded
        assert row["stages_missing_assets"] == 0  # a known count, never null on a scored row
        c2 = (row["c2_status"], row["c2_failure_category"])
        if key[1] != "torch-tiny":
            assert c2 == ("skipped", None)  # CPU-only demo tasks opt out of C2
        else:  # F07: a CPU-only torch build, or no framework at all
            assert c2 == ("failure", "cpu_only_build" if key[0] == "heuristic" else "no_framework")
    owners = {key: by_key[key]["failure_owner"] for key in EXPECTED}
    assert owners == {key: "agent" if key[0] == "noop" or key[1] == "torch-tiny" else None for key in EXPECTED}
    assert by_key[("heuristic", "torch-tiny")]["c2_torch_version"] == "2.13.0+cpu"
    assert by_key[("noop", "import-name-mismatch")]["c0_missing_source_modules"] == ["yaml"]
    assert by_key[("noop", "numpy-trainer")]["c1_failure_category"] == "deps"
    assert by_key[("noop", "numpy-trainer")]["report_python_path"] == "/usr/bin/python3"
    stages = read_stages(output)
    assert set(pc.unique(stages["stage"]).to_pylist()) >= {"agent", "report", "c0", "c1", "env_size"}
    # Honest environments pass C1 with a valid witness on every demo task: the pinned
    # repository's own files ran under the reported interpreter (a venv's python resolves to its
    # base), and nothing in the repository had to be put back.
    c1 = {(s["agent"], s["task_id"]): s for s in stages.to_pylist() if s["stage"] == "c1"}
    for key, row in by_key.items():
        assert row["repo_restored"] is True and row["repo_restored_files"] == [], key
        if key[0] != "heuristic":
            continue
        assert c1[key]["witness_status"] == "valid" == row["c1_witness"], (key, c1[key]["reason"])
        assert c1[key]["witness_repo_files"] >= 1 and c1[key]["witness_interpreter"] == "/usr/bin/python3.11", key
        witness = json.loads(c1[key]["raw"])["witness"]
        assert witness["expected_prefix"] == row["report_python_path"].rsplit("/bin/", 1)[0], key
    assert _our_containers(docker_client, demo_sweep.config.resolved_sweep_id()) == []

    config = demo_sweep.copy(tmp_path)  # the resume's and the re-grade's own copy of the output
    again = run_sweep(config, show_progress=False)
    assert again.attempts == 0 and again.skipped == 8
    assert len(_rows(config.output.dir)) == 8

    # Re-grading the stored raw outputs, with no containers, gives the same verdicts.
    from reb_ray.sweep.regrade import regrade

    regraded = {(o.trial["agent"], o.trial["task_id"]): o.trial for o in regrade(config.output.dir)}
    for key, row in by_key.items():
        assert regraded[key]["sweep_id"] == f"{row['sweep_id']}-regrade"
        _assert_regrades_to_itself(regraded[key], row)


REGRADE_COLUMNS = ["c0_status", "c0_missing", "c0_missing_modules", "c1_status", "c1_failure_category", "c2_status",
                   "c2_failure_category", "c3_status", "c4_status", "c4_failure_category", "c5_status", "c5_path",
                   "c5_version", "c5_capability", "env_size_status", "status", "failure_owner", "failure_category",
                   "failure_reason", "stages_missing_assets"]


def _assert_regrades_to_itself(regraded: dict, row: dict) -> None:
    assert {c: regraded[c] for c in REGRADE_COLUMNS} == {c: row[c] for c in REGRADE_COLUMNS}, row["trial_id"]


def _regraded(output: Path, tasks_root: Path | None = None) -> dict[str, dict]:
    from reb_ray.sweep.regrade import regrade

    return {o.trial["trial_id"]: o.trial for o in regrade(output, tasks_root=tasks_root)}


#: The scripted agents on numpy-trainer, one sweep for the module: each test below reads its
#: agent's rows. They share every sweep-wide setting, the defaults (the node's package cache is
#: mounted read-only at its own path, never at ~/.cache/pip, where CacheHogAgent writes).
SCRIPTED = {name: f"tests.helpers.scripted_agents:{name}" for name in (
    "CrashAgent", "SilentAgent", "GarbageReportAgent", "KillInitAgent", "SpyAgent", "FlakyInfraAgent", "CacheHogAgent")}
SPY_SECRET, HOST_SECRET = "sk-test-9f8e7d6c5b4a", "host-only-0a1b2c3d"


@pytest.fixture(scope="module")
def scripted(tmp_path_factory, docker_client, sandbox_image, ray_local):
    """The scripted agents' sweep (SCRIPTED, and `noop` as CacheHogAgent's reference): (config,
    result, {agent: rows by attempt}). SpyAgent's credential and a harness secret it must not see
    are in the driver's environment while it runs; FlakyInfraAgent's flag file is new."""
    from reb_ray.sweep.run import run_sweep

    tmp = tmp_path_factory.mktemp("scripted")
    config = SweepConfig(sweep_id=_unique(), output=tmp / "runs", agents=[*SCRIPTED.values(), "noop"],
                         tasks="numpy-trainer", max_concurrent=2)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("REB_TEST_AGENT_KEY", SPY_SECRET)
        env.setenv("REB_TEST_HOST_SECRET", HOST_SECRET)
        env.setenv("FLAKY_FLAG", str(tmp / "flag"))
        result = run_sweep(config, show_progress=False)
    rows: dict[str, list[dict]] = {}
    for row in sorted(_rows(config.output.dir), key=lambda r: r["attempt"]):
        rows.setdefault(row["agent"].rsplit(":", 1)[-1], []).append(row)
    return config, result, rows


@pytest.mark.docker
def test_crashing_and_silent_agents_are_recorded_not_fatal(scripted, docker_client):
    config, _, by_agent = scripted
    rows = {name: by_agent[name][-1] for name in ("CrashAgent", "SilentAgent", "GarbageReportAgent")}
    assert [len(by_agent[name]) for name in rows] == [1, 1, 1]  # scored at once, never retried
    stages = read_stages(config.output.dir).to_pylist()
    for name, row in rows.items():
        # Issue 9: no report is no free C0 (0/1 would beat noop's 1/1): every baseline import is
        # missing and C1 fails, both for the report; C2..C4 stay skipped as the spec says.
        category = row["report_status"]
        assert row["status"] == "scored" and row["failure_owner"] == "agent", name
        assert (row["c0_status"], row["c0_missing"], row["c0_total"]) == ("failure", 1, 1), name
        assert (row["c1_status"], row["c1_failure_category"]) == ("failure", category), name
        assert (row["c2_status"], row["c3_status"], row["c4_status"]) == ("skipped",) * 3, name
        assert row["failure_category"] == category and row["failure_reason"].startswith(f"{category}: c1: no usable report")
        mine = {s["stage"]: s for s in stages if s["agent"] == row["agent"]}
        assert mine["c3"]["reason"] == "demo suite is CPU-only" and mine["c0"]["failure_category"] == category
    assert rows["CrashAgent"]["agent_exit_code"] == 1 and "out of ideas" in rows["CrashAgent"]["agent_output_tail"]
    assert rows["CrashAgent"]["report_status"] == "missing_report"
    assert rows["SilentAgent"]["agent_exit_code"] == 0 and rows["SilentAgent"]["report_status"] == "missing_report"
    assert rows["GarbageReportAgent"]["report_status"] == "invalid_report"
    assert _our_containers(docker_client, config.resolved_sweep_id()) == []
    regraded = _regraded(config.output.dir)
    for row in rows.values():
        _assert_regrades_to_itself(regraded[row["trial_id"]], row)


@pytest.mark.docker
def test_agent_that_kills_init_is_sandbox_broken_by_agent(scripted, docker_client):
    """F15a: a health check before the probes; probes not_run; the agent's failure, not infra."""
    config, _, by_agent = scripted
    (row,) = by_agent["KillInitAgent"]
    assert row["status"] == "scored" and row["failure_owner"] == "agent"
    # no probe ran; the applicable stages are the agent's failures (issue 9), the others skipped
    assert (row["c0_status"], row["c0_missing"], row["c1_status"], row["c2_status"]) == ("failure", 1, "failure", "skipped")
    categories = {s["stage"]: s["failure_category"] for s in read_stages(config.output.dir).to_pylist()
                  if s["agent"] == row["agent"]}
    assert categories["c0"] == categories["c1"] == "sandbox_broken_by_agent"
    assert _our_containers(docker_client, config.resolved_sweep_id()) == []


def test_a_hanging_probe_times_out_and_the_other_trials_finish(tmp_path, docker_client, sandbox_image, ray_local):
    """F15c: per-stage deadlines end a probe that hangs forever; the sweep ends."""
    from reb_ray.sweep.run import run_sweep

    for task_id, command in (("hangs", "sleep 100000"), ("quick", "python main.py")):
        write_task(tmp_path / "suites", "hang", task_id, category="1_cpu", header="c0_baseline_total = 0",
                   cpu=f'command = "{command}"\ntimeout_s = 3', files={"main.py": "print('hi')\n"})
    config = SweepConfig(sweep_id=_unique(), output=tmp_path / "runs", suite="hang", tasks_root=tmp_path / "suites", agents=["noop"])
    run_sweep(config, show_progress=False)
    rows = {r["task_id"]: r for r in _rows(config.output.dir)}
    assert rows["hangs"]["c1_status"] == "failure" and rows["hangs"]["c1_failure_category"] == "timeout"
    assert rows["quick"]["c1_status"] == "success"
    c1 = [s for s in read_stages(config.output.dir).to_pylist() if s["stage"] == "c1" and s["task_id"] == "hangs"][0]
    assert c1["timed_out"] and c1["duration_s"] < 3 + 10


@pytest.mark.docker
def test_probes_are_hidden_and_secrets_never_reach_the_outputs(scripted):
    """During the agent phase: no probe code, no task spec, no secret but the agent's own; its
    credential is masked everywhere we write (Parquet rows, console)."""
    config, result, by_agent = scripted
    (row,) = by_agent["SpyAgent"]
    spy = row["agent_output_tail"]
    assert "spy: done" in spy and "FOUND" not in spy, spy
    assert "harness secret is [absent]" in spy and "my key is ***" in spy
    assert row["repo_modified"] is True and row["repo_modified_files"] == ["train.py"]
    everything = repr(read_trials(config.output.dir).to_pylist()) + repr(read_stages(config.output.dir).to_pylist())
    assert SPY_SECRET not in everything and "key=***" in everything
    assert row["status"] == "scored"
    assert result.scored == sum(r["status"] == "scored" for rows in by_agent.values() for r in rows)
    for path in config.output.dir.rglob("*"):
        if path.is_file():
            assert SPY_SECRET.encode() not in path.read_bytes(), path


@pytest.mark.docker
def test_infra_failures_are_retried_as_new_attempts_and_never_overwritten(scripted, tmp_path, ray_local, monkeypatch):
    from reb_ray.sweep.run import run_sweep

    rows = scripted[2]["FlakyInfraAgent"]
    assert [(r["attempt"], r["status"], r["failure_owner"]) for r in rows] == [(1, "infra_error", "infra"), (2, "scored", "agent")]
    assert rows[0]["failure_category"] == "infra_daemon"

    # With no retries allowed, a failed attempt stays; a later run resumes with attempt 2.
    monkeypatch.setenv("FLAKY_FLAG", str(tmp_path / "flag"))
    one = dict(sweep_id=_unique(), output=tmp_path / "runs2", agents=[SCRIPTED["FlakyInfraAgent"]], tasks="numpy-trainer",
               max_attempts=1)
    run_sweep(SweepConfig(**one), show_progress=False)
    assert [(r["attempt"], r["status"]) for r in _rows(tmp_path / "runs2")] == [(1, "infra_error")]
    run_sweep(SweepConfig(**one), show_progress=False)
    rows = sorted(_rows(tmp_path / "runs2"), key=lambda r: r["attempt"])
    assert [(r["attempt"], r["status"]) for r in rows] == [(1, "infra_error"), (2, "scored")]


@pytest.mark.docker
def test_pip_cache_is_not_environment_size(scripted):
    """F13: 200 MB written to ~/.cache/pip leaves the env size of the same interpreter unchanged."""
    by_agent = scripted[2]
    sizes = {name: by_agent[name][-1]["env_size_bytes"] for name in ("noop", "CacheHogAgent")}
    assert sizes["noop"] > 0 and sizes["CacheHogAgent"] == sizes["noop"]


def test_a_missing_interpreter_is_judged_once(tmp_path, docker_client, sandbox_image, ray_local):
    """Issue 9 item 13: the report names an interpreter that does not exist. Nothing that needs it
    runs (C4 used to run, exit 127 and make the DDP claim a second lie; C2 made the CUDA claim
    one): C0..C4 fail for that one reason, C5 counts the path once, env size is not run."""
    from reb_ray.sweep.run import run_sweep

    write_task(tmp_path / "suites", "ghost", "ghost", category="3_cpu+multi_gpu", header="c0_baseline_total = 3",
               cpu='command = "python main.py"\ntimeout_s = 60',
               multi_gpu='command = "python main.py"\nlauncher = "torchrun"\ntimeout_s = 60',
               files={"main.py": "import json, os, sys\nprint('hi')\n"})
    config = SweepConfig(sweep_id=_unique(), output=tmp_path / "runs", suite="ghost", tasks_root=tmp_path / "suites",
                         agents=["tests.helpers.scripted_agents:GhostInterpreterAgent"], c4_cpu_gloo=True)
    run_sweep(config, show_progress=False)
    (row,) = _rows(config.output.dir)
    stages = {s["stage"]: s for s in read_stages(config.output.dir).to_pylist()}
    assert row["status"] == "scored" and row["failure_owner"] == "agent"
    for stage in ("c0", "c1", "c2", "c3", "c4"):
        expected = ("skipped", None) if stage == "c3" else ("failure", "interpreter_missing")
        assert (stages[stage]["status"], stages[stage]["failure_category"]) == expected, stage
        assert stages[stage]["exit_code"] is None and stages[stage]["command"] is None, stage  # nothing ran
    assert (row["c0_missing"], row["c0_total"], row["c4_exit_code"], row["c1_exit_code"]) == (3, 3, None, None)
    assert (row["c5_status"], row["c5_path"], row["c5_version"], row["c5_capability"]) == ("success", 1, 0, 0)
    assert (row["env_size_status"], stages["env_size"]["failure_category"]) == ("not_run", "interpreter_missing")
    assert row["failure_reason"] == "interpreter_missing: c4: report python_path /opt/venvs/gone/bin/python does not exist"
    assert _our_containers(docker_client, config.resolved_sweep_id()) == []
    _assert_regrades_to_itself(_regraded(config.output.dir, tmp_path / "suites")[row["trial_id"]], row)


def test_a_missing_asset_fails_fast_or_is_skipped_by_flag(tmp_path, docker_client, sandbox_image, ray_local):
    """Issue 9 item 7. Without the flag: an infra row before the agent runs, naming the asset and
    its stage. With --skip-missing-assets: the agent runs, C0 is measured, C1 (which needs the
    asset) is not_run infra_assets_missing, counted in stages_missing_assets, and the trial is
    scored on the rest, not retried."""
    from reb_ray.sweep.run import run_sweep

    write_task(tmp_path / "suites", "weights", "needs-weights", category="1_cpu", header="c0_baseline_total = 2",
               cpu='command = "python main.py $REB_RAY_ASSETS/needs-weights/tiny.bin"\ntimeout_s = 60',
               cuda=off("CPU-only test task"), files={"main.py": "import os, sys\nprint(os.path.getsize(sys.argv[1]))\n"},
               assets=['name = "weights", kind = "model", path = "needs-weights/tiny.bin", stages = ["c1"]'])
    cache = tmp_path / "cache"
    cache.mkdir()
    base = dict(output=tmp_path / "runs", suite="weights", tasks_root=tmp_path / "suites", agents=["noop"],
                assets_dir=cache, max_attempts=1)

    strict = SweepConfig(sweep_id=_unique(), **base)
    run_sweep(strict, show_progress=False)
    (row,) = _rows(tmp_path / "runs")
    assert (row["status"], row["failure_owner"], row["failure_category"]) == ("infra_error", "infra", "infra_assets_missing")
    assert "'weights'" in row["failure_reason"] and "needed by c1" in row["failure_reason"]
    assert row["agent_wall_time_s"] is None and row["stages_missing_assets"] is None  # the agent never ran

    lenient = SweepConfig(sweep_id=_unique(), skip_missing_assets=True, **base)
    result = run_sweep(lenient, show_progress=False)
    assert result.attempts == 1 and result.infra_errors == 0
    row = next(r for r in _rows(tmp_path / "runs") if r["sweep_id"] == lenient.resume.sweep_id)
    stages = {s["stage"]: s for s in read_stages(tmp_path / "runs", lenient.resume.sweep_id).to_pylist()}
    assert row["status"] == "scored" and row["agent_wall_time_s"] > 0
    assert (row["c0_status"], row["c0_missing"]) == ("success", 0)
    assert (stages["c1"]["status"], stages["c1"]["failure_category"]) == ("not_run", "infra_assets_missing")
    assert "'weights'" in stages["c1"]["reason"] and row["c1_status"] == "not_run"
    assert (row["failure_owner"], row["failure_reason"], row["stages_missing_assets"]) == (None, None, 1)
    assert stages["c2"]["status"] == "skipped" and stages["c5"]["status"] == "success"
    assert _our_containers(docker_client, lenient.resolved_sweep_id()) == []
    _assert_regrades_to_itself(_regraded(tmp_path / "runs", tmp_path / "suites")[row["trial_id"]], row)


def test_a_sweep_ends_compacted_and_resumes_from_the_index(tmp_path, demo_sweep, ray_local):
    """A sweep's rows end in a few files (trials, stages, index), and the resume that skips the
    scored trials reads the index. The sweep is the shared demo sweep
    (tests/helpers/shared_runs.py); the resume runs on a copy of its output."""
    from reb_ray.results.index import read_index
    from reb_ray.sweep.run import run_sweep

    result, output = demo_sweep.result, demo_sweep.output
    assert result.attempts == 8 and result.compaction is not None
    (sweep,) = result.compaction.sweeps
    assert sweep.files_after == 3
    files = sorted(p.relative_to(output).parts[0] for p in output.glob("*/sweep-*/*.parquet"))
    assert files == ["index", "stages", "trials"]
    assert sorted(read_index(output, result.sweep_id)["trial_id"].to_pylist()) == sorted(
        f"{agent}/{task}/0" for agent, task in EXPECTED)
    again = run_sweep(demo_sweep.copy(tmp_path), show_progress=False)
    assert (again.skipped, again.attempts, again.compaction) == (8, 0, None)
