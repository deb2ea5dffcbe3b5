"""End-to-end demo sweeps: real Docker, real Ray, real pyright, real Parquet."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.compute as pc
import pytest

from reb_ray.models.sweep import SweepConfig
from reb_ray.results.read import read_stages, read_trials
from reb_ray.sandbox.ownership import MANAGED, SWEEP
from reb_ray.testing.suite import off, write_task

WHEELS = [Path("/opt/wheels")] if Path("/opt/wheels").is_dir() else []

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


def test_demo_sweep_end_to_end_and_resume(tmp_path, docker_client, sandbox_image, ray_local):
    from reb_ray.sweep.run import run_sweep

    config = SweepConfig(sweep_id=_unique(), output=tmp_path / "runs", wheelhouses=WHEELS, max_concurrent=2)
    result = run_sweep(config, show_progress=False)
    rows = _rows(config.output.dir)
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
    stages = read_stages(config.output.dir)
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
    assert _our_containers(docker_client, config.resolved_sweep_id()) == []

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


def test_crashing_and_silent_agents_are_recorded_not_fatal(tmp_path, docker_client, sandbox_image, ray_local):
    from reb_ray.sweep.run import run_sweep

    agents = ["tests.helpers.scripted_agents:CrashAgent", "tests.helpers.scripted_agents:SilentAgent", "tests.helpers.scripted_agents:GarbageReportAgent"]
    config = SweepConfig(sweep_id=_unique(), output=tmp_path / "runs", agents=agents, tasks="numpy-trainer")
    run_sweep(config, show_progress=False)
    rows = {r["agent"].split(":")[1]: r for r in _rows(config.output.dir)}
    assert set(rows) == {"CrashAgent", "SilentAgent", "GarbageReportAgent"}
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


def test_agent_that_kills_init_is_sandbox_broken_by_agent(tmp_path, docker_client, sandbox_image, ray_local):
    """F15a: a health check before the probes; probes not_run; the agent's failure, not infra."""
    from reb_ray.sweep.run import run_sweep

    config = SweepConfig(sweep_id=_unique(), output=tmp_path / "runs", agents=["tests.helpers.scripted_agents:KillInitAgent"], tasks="numpy-trainer")
    run_sweep(config, show_progress=False)
    (row,) = _rows(config.output.dir)
    assert row["status"] == "scored" and row["failure_owner"] == "agent"
    # no probe ran; the applicable stages are the agent's failures (issue 9), the others skipped
    assert (row["c0_status"], row["c0_missing"], row["c1_status"], row["c2_status"]) == ("failure", 1, "failure", "skipped")
    categories = {s["stage"]: s["failure_category"] for s in read_stages(config.output.dir).to_pylist()}
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


def test_probes_are_hidden_and_secrets_never_reach_the_outputs(tmp_path, docker_client, sandbox_image, ray_local, monkeypatch):
    """During the agent phase: no probe code, no task spec, no secret but the agent's own; its
    credential is masked everywhere we write (Parquet rows, console)."""
    from reb_ray.sweep.run import run_sweep

    secret = "sk-test-9f8e7d6c5b4a"
    monkeypatch.setenv("REB_TEST_AGENT_KEY", secret)
    monkeypatch.setenv("REB_TEST_HOST_SECRET", "host-only-0a1b2c3d")
    config = SweepConfig(sweep_id=_unique(), output=tmp_path / "runs", agents=["tests.helpers.scripted_agents:SpyAgent"], tasks="numpy-trainer")
    result = run_sweep(config, show_progress=False)
    (row,) = _rows(config.output.dir)
    spy = row["agent_output_tail"]
    assert "spy: done" in spy and "FOUND" not in spy, spy
    assert "harness secret is [absent]" in spy and "my key is ***" in spy
    assert row["repo_modified"] is True and row["repo_modified_files"] == ["train.py"]
    everything = repr(read_trials(config.output.dir).to_pylist()) + repr(read_stages(config.output.dir).to_pylist())
    assert secret not in everything and "key=***" in everything
    assert result.scored == 1
    for path in config.output.dir.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


def test_infra_failures_are_retried_as_new_attempts_and_never_overwritten(tmp_path, docker_client, sandbox_image, ray_local, monkeypatch):
    from reb_ray.sweep.run import run_sweep

    monkeypatch.setenv("FLAKY_FLAG", str(tmp_path / "flag"))
    base = dict(sweep_id=_unique(), output=tmp_path / "runs", agents=["tests.helpers.scripted_agents:FlakyInfraAgent"], tasks="numpy-trainer")
    run_sweep(SweepConfig(**base), show_progress=False)
    rows = sorted(_rows(tmp_path / "runs"), key=lambda r: r["attempt"])
    assert [(r["attempt"], r["status"], r["failure_owner"]) for r in rows] == [(1, "infra_error", "infra"), (2, "scored", "agent")]
    assert rows[0]["failure_category"] == "infra_daemon"

    # With no retries allowed, a failed attempt stays; a later run resumes with attempt 2.
    (tmp_path / "flag").unlink()
    one = dict(base, sweep_id=_unique(), output=tmp_path / "runs2", max_attempts=1)
    run_sweep(SweepConfig(**one), show_progress=False)
    assert [(r["attempt"], r["status"]) for r in _rows(tmp_path / "runs2")] == [(1, "infra_error")]
    run_sweep(SweepConfig(**one), show_progress=False)
    rows = sorted(_rows(tmp_path / "runs2"), key=lambda r: r["attempt"])
    assert [(r["attempt"], r["status"]) for r in rows] == [(1, "infra_error"), (2, "scored")]


def test_pip_cache_is_not_environment_size(tmp_path, docker_client, sandbox_image, ray_local):
    """F13: 200 MB written to ~/.cache/pip leaves the env size of the same interpreter unchanged."""
    from reb_ray.sweep.run import run_sweep

    config = SweepConfig(sweep_id=_unique(), output=tmp_path / "runs", agents=["noop", "tests.helpers.scripted_agents:CacheHogAgent"],
                         tasks="numpy-trainer", pip_cache=False)
    run_sweep(config, show_progress=False)
    sizes = {r["agent"]: r["env_size_bytes"] for r in _rows(config.output.dir)}
    assert sizes["noop"] > 0 and sizes["tests.helpers.scripted_agents:CacheHogAgent"] == sizes["noop"]


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


def test_a_sweep_ends_compacted_and_resumes_from_the_index(tmp_path, ray_local):
    """Issue 12: the sweep's rows end in a few files (trials, stages, index), and the resume
    that skips the scored trials reads the index."""
    from reb_ray.results.index import read_index
    from reb_ray.sweep.run import run_sweep

    for n in range(4):
        write_task(tmp_path / "suites", "small", f"t{n}", cpu='command = "echo cpu-ok"', files={})
    config = SweepConfig(output=tmp_path / "runs", suite="small", tasks_root=tmp_path / "suites", agents=["noop"],
                         sandbox="local", max_concurrent=2, sweep_id=_unique(), wheelhouses=[])
    result = run_sweep(config, show_progress=False)
    assert result.attempts == 4 and result.compaction is not None
    (sweep,) = result.compaction.sweeps
    assert sweep.files_after == 3
    files = sorted(p.relative_to(config.output.dir).parts[0] for p in config.output.dir.glob("*/sweep-*/*.parquet"))
    assert files == ["index", "stages", "trials"]
    assert sorted(read_index(config.output.dir, result.sweep_id)["trial_id"].to_pylist()) == [f"noop/t{n}/0" for n in range(4)]
    again = run_sweep(config, show_progress=False)
    assert (again.skipped, again.attempts, again.compaction) == (4, 0, None)
