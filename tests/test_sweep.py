"""End-to-end demo sweeps: real Docker, real Ray, real pyright, real Parquet."""

from __future__ import annotations

from pathlib import Path

import pyarrow.compute as pc
import pytest

from reb_ray.models.sweep import SweepConfig
from reb_ray.results.read import read_stages, read_trials
from reb_ray.sandbox.ownership import MANAGED, SWEEP

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


@pytest.fixture(scope="module")
def ray_local():
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


def _unique() -> str:
    """A sweep id no other sweep on this machine uses (container labels are machine-wide)."""
    import uuid

    return f"test-{uuid.uuid4().hex[:8]}"


def _rows(output: Path) -> list[dict]:
    return read_trials(output).to_pylist()


def _our_containers(docker_client, sweep_id: str) -> list:
    return docker_client.containers.list(all=True, filters={"label": [f"{MANAGED}=true", f"{SWEEP}={sweep_id}"]})


def test_demo_sweep_end_to_end_and_resume(tmp_path, docker_client, sandbox_image, ray_local):
    from reb_ray.sweep import run_sweep

    config = SweepConfig(sweep_id=_unique(), output=tmp_path / "runs", wheelhouses=WHEELS, max_concurrent=2)
    result = run_sweep(config, show_progress=False)
    rows = _rows(config.output)
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
    stages = read_stages(config.output)
    assert set(pc.unique(stages["stage"]).to_pylist()) >= {"agent", "report", "c0", "c1", "env_size"}
    assert _our_containers(docker_client, config.resolved_sweep_id()) == []

    again = run_sweep(config, show_progress=False)
    assert again.attempts == 0 and again.skipped == 8
    assert len(_rows(config.output)) == 8

    # Re-grading the stored raw outputs, with no containers, gives the same verdicts.
    from reb_ray.regrade import regrade

    regraded = {(o.trial["agent"], o.trial["task_id"]): o.trial for o in regrade(config.output)}
    columns = ["c0_status", "c0_missing", "c0_missing_modules", "c1_status", "c1_failure_category", "c2_status",
               "c2_failure_category", "c3_status", "c4_status", "c5_path", "c5_version", "c5_capability",
               "failure_owner", "failure_category"]
    for key, row in by_key.items():
        assert regraded[key]["sweep_id"] == f"{row['sweep_id']}-regrade"
        assert {c: regraded[key][c] for c in columns} == {c: row[c] for c in columns}, key


def test_crashing_and_silent_agents_are_recorded_not_fatal(tmp_path, docker_client, sandbox_image, ray_local):
    from reb_ray.sweep import run_sweep

    agents = ["tests.scripted_agents:CrashAgent", "tests.scripted_agents:SilentAgent", "tests.scripted_agents:GarbageReportAgent"]
    config = SweepConfig(sweep_id=_unique(), output=tmp_path / "runs", agents=agents, tasks="numpy-trainer")
    run_sweep(config, show_progress=False)
    rows = {r["agent"].split(":")[1]: r for r in _rows(config.output)}
    assert set(rows) == {"CrashAgent", "SilentAgent", "GarbageReportAgent"}
    for name, row in rows.items():
        assert row["status"] == "scored" and row["failure_owner"] == "agent", name
        assert row["c0_status"] == "not_run" and row["c1_status"] == "not_run" and row["c0_missing"] is None
    assert rows["CrashAgent"]["agent_exit_code"] == 1 and "out of ideas" in rows["CrashAgent"]["agent_output_tail"]
    assert rows["CrashAgent"]["report_status"] == "missing_report"
    assert rows["SilentAgent"]["agent_exit_code"] == 0 and rows["SilentAgent"]["report_status"] == "missing_report"
    assert rows["GarbageReportAgent"]["report_status"] == "invalid_report"
    assert _our_containers(docker_client, config.resolved_sweep_id()) == []


def test_agent_that_kills_init_is_sandbox_broken_by_agent(tmp_path, docker_client, sandbox_image, ray_local):
    """F15a: a health check before the probes; probes not_run; the agent's failure, not infra."""
    from reb_ray.sweep import run_sweep

    config = SweepConfig(sweep_id=_unique(), output=tmp_path / "runs", agents=["tests.scripted_agents:KillInitAgent"], tasks="numpy-trainer")
    run_sweep(config, show_progress=False)
    (row,) = _rows(config.output)
    assert row["status"] == "scored" and row["failure_owner"] == "agent"
    assert row["c0_status"] == "not_run" and row["c1_status"] == "not_run" and row["c0_missing"] is None
    categories = {s["stage"]: s["failure_category"] for s in read_stages(config.output).to_pylist()}
    assert categories["c0"] == categories["c1"] == "sandbox_broken_by_agent"
    assert _our_containers(docker_client, config.resolved_sweep_id()) == []


HANGING_TASK = """
id = "{id}"
suite = "hang"
category = "1_cpu"
c0_baseline_total = 0
source = {{ bundled = "repo" }}

[stages.cpu]
command = "{command}"
timeout_s = 3
"""


def test_a_hanging_probe_times_out_and_the_other_trials_finish(tmp_path, docker_client, sandbox_image, ray_local):
    """F15c: per-stage deadlines end a probe that hangs forever; the sweep ends."""
    from reb_ray.sweep import run_sweep

    for task_id, command in (("hangs", "sleep 100000"), ("quick", "echo fine")):
        task_dir = tmp_path / "suites" / "hang" / task_id
        (task_dir / "repo").mkdir(parents=True)
        (task_dir / "repo" / "main.py").write_text("print('hi')\n")
        (task_dir / "task.toml").write_text(HANGING_TASK.format(id=task_id, command=command))
    config = SweepConfig(sweep_id=_unique(), output=tmp_path / "runs", suite="hang", tasks_root=tmp_path / "suites", agents=["noop"])
    run_sweep(config, show_progress=False)
    rows = {r["task_id"]: r for r in _rows(config.output)}
    assert rows["hangs"]["c1_status"] == "failure" and rows["hangs"]["c1_failure_category"] == "timeout"
    assert rows["quick"]["c1_status"] == "success"
    c1 = [s for s in read_stages(config.output).to_pylist() if s["stage"] == "c1" and s["task_id"] == "hangs"][0]
    assert c1["timed_out"] and c1["duration_s"] < 3 + 10


def test_probes_are_hidden_and_secrets_never_reach_the_outputs(tmp_path, docker_client, sandbox_image, ray_local, monkeypatch):
    """During the agent phase: no probe code, no task spec, no secret but the agent's own; its
    credential is masked everywhere we write (Parquet rows, console)."""
    from reb_ray.sweep import run_sweep

    secret = "sk-test-9f8e7d6c5b4a"
    monkeypatch.setenv("REB_TEST_AGENT_KEY", secret)
    monkeypatch.setenv("REB_TEST_HOST_SECRET", "host-only-0a1b2c3d")
    config = SweepConfig(sweep_id=_unique(), output=tmp_path / "runs", agents=["tests.scripted_agents:SpyAgent"], tasks="numpy-trainer")
    result = run_sweep(config, show_progress=False)
    (row,) = _rows(config.output)
    spy = row["agent_output_tail"]
    assert "spy: done" in spy and "FOUND" not in spy, spy
    assert "harness secret is [absent]" in spy and "my key is ***" in spy
    assert row["repo_modified"] is True and row["repo_modified_files"] == ["train.py"]
    everything = repr(read_trials(config.output).to_pylist()) + repr(read_stages(config.output).to_pylist())
    assert secret not in everything and "key=***" in everything
    assert secret not in repr(result.outcomes)
    for path in config.output.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


def test_infra_failures_are_retried_as_new_attempts_and_never_overwritten(tmp_path, docker_client, sandbox_image, ray_local, monkeypatch):
    from reb_ray.sweep import run_sweep

    monkeypatch.setenv("FLAKY_FLAG", str(tmp_path / "flag"))
    base = dict(sweep_id=_unique(), output=tmp_path / "runs", agents=["tests.scripted_agents:FlakyInfraAgent"], tasks="numpy-trainer")
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
    from reb_ray.sweep import run_sweep

    config = SweepConfig(sweep_id=_unique(), output=tmp_path / "runs", agents=["noop", "tests.scripted_agents:CacheHogAgent"],
                         tasks="numpy-trainer", pip_cache=False)
    run_sweep(config, show_progress=False)
    sizes = {r["agent"]: r["env_size_bytes"] for r in _rows(config.output)}
    assert sizes["noop"] > 0 and sizes["tests.scripted_agents:CacheHogAgent"] == sizes["noop"]
