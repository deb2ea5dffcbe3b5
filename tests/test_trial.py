"""How a trial's sandbox is configured (caches, wheelhouses, assets; pure), and what its rows keep
as evidence (real Docker and local sandboxes, real Parquet)."""

from __future__ import annotations

import pytest

from reb_ray.models.sweep import SweepConfig, TrialSpec
from reb_ray.suite.load import load_suite
from reb_ray.testing.suite import off, write_task
from reb_ray.trial.prepare import PIP_CACHE_MOUNT, sandbox_config


def _spec(**config) -> TrialSpec:
    return TrialSpec(sweep_id="s", agent="noop", task=load_suite("demo")[0], trial_index=0, config=SweepConfig(**config))


def test_pip_cache_is_read_only_find_links_after_the_wheelhouses(tmp_path):
    """Issue 11: the node's cache is never writable by a trial (it was mounted read-write)."""
    cache, wheels = tmp_path / "pip", tmp_path / "wheels"
    wheels.mkdir()
    config, env = sandbox_config(_spec(pip_cache_dir=cache, wheelhouses=[wheels]), gpus=["3"])
    assert config.rw_mounts == {} and "PIP_CACHE_DIR" not in env
    assert config.mounts == {str(wheels): "/opt/reb-ray/wheelhouse/0", str(cache): PIP_CACHE_MOUNT}
    assert env["PIP_FIND_LINKS"] == f"/opt/reb-ray/wheelhouse/0 {PIP_CACHE_MOUNT}" and config.gpus == ["3"]


def test_sandbox_limits_are_on_by_default(tmp_path):
    from reb_ray.sandbox.limits import default_memory_bytes

    config, _env = sandbox_config(_spec(wheelhouses=[], pip_cache=False), gpus=[])
    assert config.pids_limit == 4096 and config.disk_quota_bytes == 50 * 1024**3
    assert config.memory_bytes == default_memory_bytes(1.0, None)
    config, _env = sandbox_config(_spec(wheelhouses=[], pip_cache=False, pids_limit=100, memory_bytes=2**30,
                                         disk_quota_bytes=2**31), gpus=[])
    assert (config.pids_limit, config.memory_bytes, config.disk_quota_bytes) == (100, 2**30, 2**31)


def test_a_fork_bomb_is_the_agents_pids_limit_failure(sandbox_image):
    """Issue 11 item 1: the row records the limits and which fired; the trial ends as the agent's."""
    from reb_ray.trial.run import run_trial

    config = SweepConfig(wheelhouses=[], pip_cache=False, pids_limit=128)
    task = next(t for t in load_suite("demo") if t.id == "numpy-trainer")
    row = run_trial(TrialSpec(sweep_id="forkbomb", agent="tests.helpers.scripted_agents:ForkBombAgent", task=task, trial_index=0,
                              config=config, image=sandbox_image)).trial
    assert (row["status"], row["failure_owner"], row["failure_category"]) == ("scored", "agent", "pids_limit")
    assert row["sandbox_limit_fired"] == "pids_limit" and row["agent_limit"] == "pids_limit=128"
    assert row["sandbox_pids_limit"] == 128 and row["sandbox_disk_quota_bytes"] == 50 * 1024**3
    assert row["sandbox_memory_bytes"] > 0 and row["agent_wall_time_s"] < 120


def test_a_poisoned_cache_never_reaches_the_next_trial(sandbox_image, tmp_path):
    """Issue 11 item 3: one trial writes a fake wheel everywhere pip reads; the next sees none of it."""
    from reb_ray.trial.run import run_trial

    cache = tmp_path / "cache"
    config = SweepConfig(wheelhouses=[], pip_cache_dir=cache)
    task = next(t for t in load_suite("demo") if t.id == "numpy-trainer")

    def trial(agent: str) -> dict:
        return run_trial(TrialSpec(sweep_id="poison", agent=f"tests.helpers.scripted_agents:{agent}", task=task, trial_index=0,
                                   config=config, image=sandbox_image)).trial

    poisoner = trial("PoisonCacheAgent")
    assert "poisoned /root/.cache/pip" in poisoner["agent_output_tail"]  # its own cache: allowed, and discarded
    assert f"poisoned {PIP_CACHE_MOUNT}" not in poisoner["agent_output_tail"]
    assert list(cache.rglob("numpy-9.9.9*")) == []
    spy = trial("CacheSpyAgent")
    assert "spy-done" in spy["agent_output_tail"] and "numpy-9.9.9" not in spy["agent_output_tail"]


def test_no_pip_cache_flag_turns_it_off(tmp_path):
    config, env = sandbox_config(_spec(pip_cache=False, wheelhouses=[]), gpus=[])
    assert config.rw_mounts == {} and env == {"PIP_NO_CACHE_DIR": "1"}


def test_assets_are_mounted_read_only(tmp_path):
    config, _env = sandbox_config(_spec(assets_dir=tmp_path, wheelhouses=[]), gpus=[])
    assert config.mounts[str(tmp_path)] == "/opt/reb-ray/assets"
    assert str(tmp_path) not in config.rw_mounts


def test_probe_env_is_offline_with_hf_home_in_the_read_only_cache_and_a_writable_datasets_cache(tmp_path):
    from reb_ray.trial.probe_phase import probe_env

    env = probe_env(_spec(assets_dir=tmp_path, wheelhouses=[]))
    assert env["HF_HUB_OFFLINE"] == "1" and env["HF_HOME"] == "/opt/reb-ray/assets/huggingface"
    assert env["HF_DATASETS_CACHE"].startswith("/tmp/")  # `datasets` writes locks and Arrow files
    assert "HF_HOME" not in probe_env(_spec(wheelhouses=[]))  # no cache given: nothing points into it


@pytest.mark.parametrize("provider", ["docker", "local"])
def test_between_phases_records_what_the_agent_left_running(slow_process, provider, request):
    """Issue 9 item 10: the trials row says what the between-phases cleanup stopped."""
    from reb_ray.trial.run import run_trial

    image = request.getfixturevalue("sandbox_image") if provider == "docker" else None
    config = SweepConfig(sandbox=provider, unsafe_local=True, wheelhouses=[], pip_cache=False)
    task = next(t for t in load_suite("demo") if t.id == "numpy-trainer")
    one = run_trial(TrialSpec(sweep_id=f"leftovers-{provider}", agent="tests.helpers.scripted_agents:LeaveBehindAgent", task=task,
                              trial_index=0, config=config, image=image)).trial
    assert (one["leftover_processes"], one["leftover_commands"]) == (1, ["sleep 1000"])
    many = run_trial(TrialSpec(sweep_id=f"leftovers-{provider}", agent="tests.helpers.scripted_agents:LeaveManyBehindAgent",
                               task=task, trial_index=0, config=config, image=image)).trial
    assert many["leftover_processes"] == 25
    commands = many["leftover_commands"]
    prefix = "python3 -c import time; time.sleep(1000) "
    assert commands == [prefix + "x" * (200 - len(prefix))] * 20  # the first 20, each cut to 200 characters


# -- evidence: whole-output success rules, truncation, side logs, full-log artifacts (real sandboxes)

# C1: 150 KiB before the line the rule needs, 100 KiB after: it is in neither the kept head nor tail.
EVIDENCE_CPU = """command = "echo 'helper: cannot bind 127.0.0.1:29510' > helper.log; python train.py"
side_logs = ["helper.log", "never-written.log"]
timeout_s = 120
success = { exit_code = 0, log_pattern = "^Starting training on cpu$" }"""
# C4: 50 MiB of output, then the line the rule needs (C4 runs on CPU with --c4-cpu-gloo).
EVIDENCE_MULTI_GPU = """command = "python c4.py"
launcher = "python"
timeout_s = 120
success = { exit_code = 0, log_pattern = "^rank 1 done$" }"""
C4 = """
import sys
data = (b"rank 0: step loss 0.25\\n" * (52428800 // 23 + 1))[:52428800]
sys.stdout.buffer.write(data + b"\\nrank 1 done\\n")
"""
TRAIN = """
for i in range(1500):
    print("noise %04d " % i + "." * 88)
print("Starting training on cpu")
for i in range(1000):
    print("after %04d " % i + "." * 88)
"""


@pytest.mark.parametrize("provider", ["docker", "local"])
def test_rows_keep_all_evidence_of_a_chatty_trial(slow_process, provider, tmp_path, request):
    import gzip
    import hashlib

    from reb_ray.suite.load import load_task
    from reb_ray.results.parquet_sink import ParquetSink
    from reb_ray.results.read import read_stages, read_trials
    from reb_ray.trial.run import run_trial

    task_dir = write_task(tmp_path / "tasks", "ev", "chatty", category="1_cpu", header="c0_baseline_total = 0",
                          cpu=EVIDENCE_CPU, multi_gpu=EVIDENCE_MULTI_GPU, cuda=off("cpu only"),
                          files={"train.py": TRAIN, "c4.py": C4})
    image = request.getfixturevalue("sandbox_image") if provider == "docker" else None
    config = SweepConfig(sandbox=provider, output=tmp_path / "runs", wheelhouses=[], pip_cache=False, c4_cpu_gloo=True)
    key = "sk-chatty-0123456789"
    spec = TrialSpec(sweep_id="ev", agent="tests.helpers.scripted_agents:ChattyAgent", task=load_task(task_dir / "task.toml"),
                     trial_index=0, config=config, image=image, credentials={"REB_TEST_AGENT_KEY": key})
    outcome = run_trial(spec)
    ParquetSink(config.output.dir).write([outcome.trial], outcome.stages)

    trial = read_trials(config.output.dir).to_pylist()[0]
    stages = {s["stage"]: s for s in read_stages(config.output.dir).to_pylist()}
    assert trial["status"] == "scored", trial["failure_reason"]
    c1, c4, agent = stages["c1"], stages["c4"], stages["agent"]
    train_out = "".join(
        [f"noise {i:04d} {'.' * 88}\n" for i in range(1500)] + ["Starting training on cpu\n"]
        + [f"after {i:04d} {'.' * 88}\n" for i in range(1000)]).encode()
    # C1: graded on the whole output although the kept head and tail lost the line.
    assert c1["status"] == "success" and c1["log_pattern_matched"] is True and c1["log_pattern"] == "^Starting training on cpu$"
    assert "Starting training" not in c1["log_head"] + c1["log_tail"]
    assert c1["output_truncated"] is True and c1["output_dropped_bytes"] == len(train_out) - 2 * 8192
    assert gzip.open(config.output.dir / c1["log_path"]).read() == train_out and c1["log_cut_bytes"] == 0
    helper, never = c1["side_logs"]
    assert helper == {"path": "helper.log", "size_bytes": 36, "truncated": False,
                      "text": "helper: cannot bind 127.0.0.1:29510\n", "error": None}
    assert never["error"] == "not found after the stage" and never["text"] is None
    # C4: 50 MiB, truncated in the row with the exact count, whole in the artifact.
    expected = (b"rank 0: step loss 0.25\n" * (52428800 // 23 + 1))[:52428800] + b"\nrank 1 done\n"
    assert c4["status"] == "success", c4["reason"]
    assert c4["output_truncated"] is True and c4["output_dropped_bytes"] == len(expected) - 2 * 8192
    assert c4["log_tail"].endswith("rank 1 done\n") and c4["side_logs"] is None
    artifact = config.output.dir / c4["log_path"]
    digest = hashlib.sha256()
    with gzip.open(artifact) as f:
        while block := f.read(1 << 20):
            digest.update(block)
    assert digest.digest() == hashlib.sha256(expected).digest() and artifact.stat().st_size < 2 * 2**20
    # The agent: both execs in one log, its credential masked there as in the rows.
    assert trial["agent_log_path"] == agent["log_path"] == "artifacts/sweep_id=ev/tests.helpers.scripted_agents%3AChattyAgent%2Fchatty%2F0/1/agent.log.gz"
    log = gzip.open(config.output.dir / agent["log_path"]).read().decode()
    assert log.startswith("chatty: first step\nchatty: key ***\n") and log.endswith("chatty: done\n")
    assert key not in log and len(log) > 307200
    assert agent["output_truncated"] is True and agent["output_dropped_bytes"] == len(log.encode()) - 2 * 8192 + len(key) - 3
    assert stages["c0"]["log_path"] is None and stages["c0"]["output_truncated"] is None  # no command output of its own


@pytest.mark.parametrize("provider", ["docker", "local"])
@pytest.mark.parametrize("agent, why", [("SymlinkReportAgent", "symlink"), ("FifoReportAgent", "regular file"),
                                        ("DirectoryReportAgent", "regular file")])
def test_a_report_that_is_not_a_regular_file_is_the_agents_invalid_report(provider, agent, why, request):
    """Issue 11 item 5: a symlink out of the sandbox, a FIFO or a directory at the report path is
    a scored invalid_report naming what it was; never a harness error, never a hang."""
    from reb_ray.trial.run import run_trial

    image = request.getfixturevalue("sandbox_image") if provider == "docker" else None
    config = SweepConfig(sandbox=provider, unsafe_local=True, wheelhouses=[], pip_cache=False)
    task = next(t for t in load_suite("demo") if t.id == "numpy-trainer")
    out = run_trial(TrialSpec(sweep_id=f"bad-report-{provider}", agent=f"tests.helpers.scripted_agents:{agent}", task=task,
                              trial_index=0, config=config, image=image))
    row = out.trial
    assert (row["status"], row["report_status"], row["report_source"]) == ("scored", "invalid_report", "agent_file")
    report = next(s for s in out.stages if s["stage"] == "report")
    assert report["status"] == "failure" and why in report["reason"]
    assert "environ" not in (report.get("raw") or "") and row["c1_status"] == "failure"
