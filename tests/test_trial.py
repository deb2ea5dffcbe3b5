"""How a trial's sandbox is configured (pure), and what a trial records between its phases (real sandboxes)."""

from __future__ import annotations

import pytest

from reb_ray.models.sweep import SweepConfig, TrialSpec
from reb_ray.models.task import load_suite
from reb_ray.trial import PIP_CACHE_MOUNT, _sandbox_config


def _spec(**config) -> TrialSpec:
    return TrialSpec(sweep_id="s", agent="noop", task=load_suite("demo")[0], trial_index=0, config=SweepConfig(**config))


def test_pip_cache_is_shared_by_default_and_wheelhouses_are_find_links(tmp_path):
    cache, wheels = tmp_path / "pip", tmp_path / "wheels"
    wheels.mkdir()
    config, env = _sandbox_config(_spec(pip_cache_dir=cache, wheelhouses=[wheels]), gpus=["3"])
    assert config.rw_mounts == {str(cache): PIP_CACHE_MOUNT} and env["PIP_CACHE_DIR"] == PIP_CACHE_MOUNT
    assert config.mounts == {str(wheels): "/opt/reb-ray/wheelhouse/0"}
    assert env["PIP_FIND_LINKS"] == "/opt/reb-ray/wheelhouse/0" and config.gpus == ["3"]


def test_no_pip_cache_flag_turns_it_off(tmp_path):
    config, env = _sandbox_config(_spec(pip_cache=False, wheelhouses=[]), gpus=[])
    assert config.rw_mounts == {} and env == {"PIP_NO_CACHE_DIR": "1"}


def test_assets_are_mounted_read_only(tmp_path):
    config, _env = _sandbox_config(_spec(assets_dir=tmp_path, wheelhouses=[]), gpus=[])
    assert config.mounts[str(tmp_path)] == "/opt/reb-ray/assets"
    assert str(tmp_path) not in config.rw_mounts


def test_probe_env_is_offline_with_hf_home_in_the_read_only_cache_and_a_writable_datasets_cache(tmp_path):
    from reb_ray.probe_phase import probe_env

    env = probe_env(_spec(assets_dir=tmp_path, wheelhouses=[]))
    assert env["HF_HUB_OFFLINE"] == "1" and env["HF_HOME"] == "/opt/reb-ray/assets/huggingface"
    assert env["HF_DATASETS_CACHE"].startswith("/tmp/")  # `datasets` writes locks and Arrow files
    assert "HF_HOME" not in probe_env(_spec(wheelhouses=[]))  # no cache given: nothing points into it


@pytest.mark.parametrize("provider", ["docker", "local"])
def test_between_phases_records_what_the_agent_left_running(provider, request):
    """Issue 9 item 10: the trials row says what the between-phases cleanup stopped."""
    from reb_ray.trial import run_trial

    image = request.getfixturevalue("sandbox_image") if provider == "docker" else None
    config = SweepConfig(sandbox=provider, unsafe_local=True, wheelhouses=[], pip_cache=False)
    task = next(t for t in load_suite("demo") if t.id == "numpy-trainer")
    one = run_trial(TrialSpec(sweep_id=f"leftovers-{provider}", agent="tests.scripted_agents:LeaveBehindAgent", task=task,
                              trial_index=0, config=config, image=image)).trial
    assert (one["leftover_processes"], one["leftover_commands"]) == (1, ["sleep 1000"])
    many = run_trial(TrialSpec(sweep_id=f"leftovers-{provider}", agent="tests.scripted_agents:LeaveManyBehindAgent",
                               task=task, trial_index=0, config=config, image=image)).trial
    assert many["leftover_processes"] == 50  # 25 shells and their 25 sleeps
    commands = many["leftover_commands"]
    assert len(commands) == 20 and all(len(c) <= 200 for c in commands)
    assert "sh -c sleep 1000; : " + "x" * 180 in commands
