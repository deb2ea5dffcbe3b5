"""`reb-ray sweep` options: --config values, flags on top, one-line errors."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from reb_ray.cli.sweep import load_config
from reb_ray.errors import RebRayError


def test_flags_override_config_file(tmp_path):
    cfg = tmp_path / "sweep.toml"
    cfg.write_text('suite = "demo"\nagents = ["noop"]\ntrials = 3\nmax_concurrent = 4\n')
    config = load_config(cfg, {"trials": 2, "tasks": None})
    assert config.agents == ["noop"] and config.trials == 2 and config.cluster.max_concurrent == 4


def test_bad_config_value_is_one_line_naming_file_field_value(tmp_path):
    cfg = tmp_path / "sweep.toml"
    cfg.write_text("trials = 0\n")
    with pytest.raises(RebRayError) as err:
        load_config(cfg, {})
    message = str(err.value)
    assert "\n" not in message and str(cfg) in message and "trials = 0" in message


def test_unknown_config_key_is_reported(tmp_path):
    cfg = tmp_path / "sweep.toml"
    cfg.write_text("agnets = ['noop']\n")
    with pytest.raises(RebRayError, match="unknown key .agnets.; did you mean .agents."):
        load_config(cfg, {})


def test_sweep_id_is_stable_for_the_same_trial_set():
    a = load_config(None, {"agents": ["noop"], "output": Path("x")})
    b = load_config(None, {"agents": ["noop"], "output": Path("y")})
    assert a.resolved_sweep_id() == b.resolved_sweep_id()
    assert a.resolved_sweep_id() != load_config(None, {"agents": ["heuristic"]}).resolved_sweep_id()


def test_skip_missing_assets_from_flag_or_config_file(tmp_path):
    assert load_config(None, {}).skip_missing_assets is False
    assert load_config(None, {"skip_missing_assets": True}).skip_missing_assets is True
    cfg = tmp_path / "sweep.toml"
    cfg.write_text("skip_missing_assets = true\n")
    assert load_config(cfg, {}).skip_missing_assets is True


def test_max_cost_usd_and_prices_flags_and_the_budget_is_not_the_sweeps_identity(tmp_path):
    cfg = tmp_path / "sweep.toml"
    cfg.write_text('agents = ["noop"]\nmax_cost_usd = 5.0\nllm_retry_backoff_s = 1.0\n')
    config = load_config(cfg, {"prices_file": tmp_path / "prices.toml"})
    assert (config.llm.max_cost_usd, config.llm.retry_backoff_s, config.llm.prices_file) == (5.0, 1.0, tmp_path / "prices.toml")
    assert config.resolved_sweep_id() == load_config(None, {"agents": ["noop"], "max_cost_usd": 50.0}).resolved_sweep_id()
    with pytest.raises(RebRayError, match=r"^flags: --max-cost-usd = -1\.0: "):
        load_config(None, {"max_cost_usd": -1.0})


def test_an_agents_list_beside_agents_tables_says_what_to_do(tmp_path):
    path = tmp_path / "sweep.toml"
    path.write_text('agents = ["mini"]\n[agents.mini]\nkind = "mini_swe_agent"\nmodel = "gpt-5-mini"\n')
    with pytest.raises(RebRayError) as info:
        load_config(path, {})
    message = str(info.value)
    assert message.startswith(f"{path}: not valid TOML") and "leave out `agents = [...]`" in message and "\n" not in message


@pytest.mark.integration
def test_an_explicit_network_in_the_config_is_warned_about_at_sweep_start(tmp_path):
    """`network = "bridge"` opts the open policy's sandboxes out of the host guard: never silently."""
    import subprocess
    import sys

    assert load_config(None, {}).network.name is None  # the default: reb-ray's guarded network
    cfg = tmp_path / "sweep.toml"
    cfg.write_text('network = "bridge"\n')
    assert load_config(cfg, {}).network.name == "bridge"
    done = subprocess.run([sys.executable, "-c", "from reb_ray.cli import main; main()", "sweep", "--config", str(cfg),
                           "--suite", "no-such-suite", "--quiet", "--output", str(tmp_path / "runs")],
                          capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parents[2])
    warning = next(line for line in done.stderr.splitlines() if line.startswith("warning:"))
    assert "network = 'bridge'" in warning and "without the host guard" in warning and "network_host_guard" in warning
    assert "unknown suite 'no-such-suite'" in done.stderr  # the sweep itself then fails as it would anyway


def test_gpu_sharing_is_a_flag_and_a_config_key_and_off_by_default(tmp_path):
    """Issue 12, item 5: `--share-gpus-in-agent-phase` / `share_gpus_in_agent_phase = true`."""
    import inspect

    from reb_ray.cli.sweep import sweep

    option = inspect.signature(sweep).parameters["share_gpus_in_agent_phase"].default
    assert "--share-gpus-in-agent-phase" in option.param_decls
    cfg = tmp_path / "sweep.toml"
    cfg.write_text("share_gpus_in_agent_phase = true\n")
    assert load_config(cfg, {}).cluster.share_gpus_in_agent_phase is True
    assert load_config(None, {"share_gpus_in_agent_phase": True}).cluster.share_gpus_in_agent_phase is True
    assert load_config(None, {}).cluster.share_gpus_in_agent_phase is False


def _field(config, path: str):
    value = config
    for part in path.split("."):
        value = getattr(value, part)
    return value


def test_every_sweep_option_sets_an_existing_setting(tmp_path):
    """Each `reb-ray sweep` option that sets configuration maps to a SweepConfig field path that
    exists (no silent typo), and a value given through it lands there."""
    import inspect
    import typing

    from reb_ray.cli.sweep import OPTION_FIELDS, sweep
    from reb_ray.models.sweep import SweepConfig

    params = inspect.signature(sweep).parameters
    assert set(params) - set(OPTION_FIELDS) == {"config", "quiet"}  # the two options that set nothing
    assert set(OPTION_FIELDS) <= set(params)
    paths = SweepConfig.field_paths()
    assert [p for p, _ in OPTION_FIELDS.values() if p not in paths] == []
    assert len({p for p, _ in OPTION_FIELDS.values()}) == len(OPTION_FIELDS)  # no two options set one field
    hints = typing.get_type_hints(sweep)
    choices = {"sandbox": "local", "network_policy": "open", "keep_environments": "all", "agents": "noop"}
    samples = {bool: True, int: 100, float: 3.0, str: "x", Path: tmp_path, list[Path]: [tmp_path],
               list[str]: ["python:3.13=local/python:3.13"]}
    for name, (path, convert) in OPTION_FIELDS.items():
        kind = next(t for t in (typing.get_args(hints[name]) or (hints[name],)) if t is not type(None))
        value = convert(choices.get(name, samples[kind]))
        assert value is not None, name
        assert _field(load_config(None, {path: value}), path) == value, name


def test_image_map_from_the_file_or_flags_and_bad_values_in_one_line(tmp_path):
    """Harbor base images mapped from `[sandbox] image_map` or `--image-map FROM=TO` (flags over
    the file); a value without `=`, or a side left empty, is refused in one line naming it."""
    from tests.cli.in_process import run_cli

    cfg = tmp_path / "sweep.toml"
    cfg.write_text('[sandbox]\nimage_map = { "python:3.13" = "local/py:3.13", "docker.io/" = "mirror:5000/" }\n')
    assert load_config(cfg, {}).sandbox.image_map == {"python:3.13": "local/py:3.13", "docker.io/": "mirror:5000/"}
    assert load_config(cfg, {"sandbox.image_map": {"golang:1.22": "local/go"}}).sandbox.image_map == {"golang:1.22": "local/go"}
    cfg.write_text('[sandbox]\nimage_map = { "python:3.13" = " " }\n')
    with pytest.raises(RebRayError) as err:
        load_config(cfg, {})
    assert "\n" not in str(err.value) and "image_map" in str(err.value) and "python:3.13" in str(err.value)
    done = run_cli("sweep", "--image-map", "python:3.13", "--output", str(tmp_path / "out"))
    assert done.returncode == 2 and "--image-map" in done.stderr and "FROM-IMAGE=LOCAL-IMAGE" in done.stderr
    assert not (tmp_path / "out").exists()


def test_a_flag_error_names_the_flag_as_typed():
    from reb_ray.cli.sweep import option_flag

    assert (option_flag("memory_gb"), option_flag("assets"), option_flag("repo_mirror")) == ("--memory-gb", "--assets", "--repo-mirror")
    with pytest.raises(RebRayError, match=r"^flags: --pids-limit = 10: "):
        load_config(None, {"sandbox.pids_limit": 10})
    with pytest.raises(RebRayError, match=r"^flags: --network-policy = 'registries': the local sandbox shares"):
        load_config(None, {"network.policy": "registries", "sandbox.provider": "local"})


def test_the_closing_line_names_the_sweep_for_trial_show_once_the_output_holds_another(tmp_path):
    """After a second sweep in the same output (the README's tour: the demo, then a narrower
    sweep that reuses a demo trial), `trial show OUTPUT ID` alone is refused for a trial copied
    into both; the line the sweep ends with must print a command that runs as it is."""
    from reb_ray.cli.sweep import next_line
    from reb_ray.sweep.identity import check_identity

    output = tmp_path / "reb-runs"
    check_identity(output, "demo-aaaa", {"suite": "demo"}, allow_drift=False)
    only = next_line(output, "demo-aaaa", "heuristic/numpy-trainer/0")
    assert f"`reb-ray trial show {output} heuristic/numpy-trainer/0` (one trial)" in only
    assert "--sweep-id" not in only

    check_identity(output, "demo-bbbb", {"suite": "demo"}, allow_drift=False)
    second = next_line(output, "demo-bbbb", "heuristic/numpy-trainer/0")
    assert f"`reb-ray trial show {output} heuristic/numpy-trainer/0 --sweep-id demo-bbbb` (one trial)" in second
    assert f"`reb-ray report {output}`" in second and f"`reb-ray view {output}`" in second


def test_each_default_the_sweep_help_states_is_the_settings_default():
    """`reb-ray sweep --help` states an option's default where it is a number ("(default 1)"),
    and that number, converted as the flag's value is (GiB to bytes), is SweepConfig's default;
    a default the model leaves unset (None: decided on each node) is the help's words alone."""
    import re

    from reb_ray.cli.sweep import OPTION_FIELDS, sweep

    defaults = load_config(None, {})
    stated = {}
    for name, param in inspect.signature(sweep).parameters.items():
        match = re.search(r"\(default (\d+(?:\.\d+)?)\b", param.default.help or "")
        if match and name in OPTION_FIELDS:
            path, convert = OPTION_FIELDS[name]
            if _field(defaults, path) is not None:
                stated[name] = (convert(float(match.group(1))), _field(defaults, path))
    assert {"trials", "agent_timeout", "pids_limit", "max_attempts", "shm_size_gb", "disk_quota_gb"} <= set(stated)
    assert {name: pair for name, pair in stated.items() if pair[0] != pair[1]} == {}


def test_the_suite_help_names_the_harbor_prefix_the_settings_read():
    """The README runs `--suite harbor:PATH`; `reb-ray sweep --help` says so with the prefix
    SweepConfig itself recognises."""
    from reb_ray.cli.sweep import sweep
    from reb_ray.models.sweep import HARBOR_PREFIX

    assert f"{HARBOR_PREFIX}PATH" in inspect.signature(sweep).parameters["suite"].default.help
