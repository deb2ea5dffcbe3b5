"""SweepConfig in sections: the flat form still loads, ids and identity keys stay those of the
flat model (so existing output directories resume), and bad keys fail in one line."""

from __future__ import annotations

import hashlib
import json
from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from reb_ray.cli.sweep import load_config
from reb_ray.errors import RebRayError
from reb_ray.models.agent import AgentSpec
from reb_ray.models.sweep import FLAT_KEYS, SECTIONS, SweepConfig, _shorthand_identity
from reb_ray.sweep.identity import SCORED_SETTINGS, check_identity, drifted

GiB = 1024**3

#: Three configurations in the flat form, as the flat model (before sections) took them.
FLAT_CONFIGS = {
    "default": {},
    "registries": dict(suite="researchenvbench", tasks="numpy-*,scipy-*", agents=["claude_code@claude-sonnet-4-5", "noop"],
                       trials=3, network_policy="registries", network_allow=["pypi.org", "*.pythonhosted.org"],
                       pids_limit=1024, memory_bytes=8 * GiB, shm_size_bytes=2 * GiB, agent_timeout_s=900.0,
                       cpus_per_trial=2.5, max_concurrent=4, address="ray://head:10001", wandb_project="p",
                       max_cost_usd=5.0),
    "local-table": dict(suite="demo", agent_specs={"h2": {"kind": "heuristic", "max_turns": 7}}, agents=["h2", "heuristic"],
                        sandbox="local", c4_cpu_gloo=True, skip_missing_assets=True, pip_cache=False,
                        disk_quota_bytes=10 * GiB, image_profile="full", trials=2),
}

#: Captured from the flat model's code (the commit before sections) for FLAT_CONFIGS: its
#: `resolved_sweep_id()`, and the sha256 of the sorted JSON of the identity's settings entries
#: (each of SCORED_SETTINGS by name, and `network_allow`) as `scoring_identity` stored them.
CAPTURED = {
    "default": ("demo-17fd8020", "305481c6c20160b083be558858147a7c41b1029cecc1b4f19a15e803cc89f3d3"),
    "registries": ("researchenvbench-c1199f74", "8d6d5b8e8fce042793e14c8ed69a050e77cc1181687c826c95ca69ef953bda95"),
    "local-table": ("demo-9004be4a", "c57fe700a5870ef1a4993ed8a6471579de01c2f35168f997d51df0d5b63627ea"),
}
#: The settings entries the flat model stored for "registries" (its identity file's values).
CAPTURED_REGISTRIES = {"agent_timeout_s": 900.0, "c4_cpu_gloo": False, "cpus_per_trial": 2.5, "disk_quota_bytes": 53687091200,
                       "image_profile": "minimal", "memory_bytes": 8589934592, "network_allow": ["*.pythonhosted.org", "pypi.org"],
                       "network_policy": "registries", "pids_limit": 1024, "pip_cache": True, "sandbox": "docker",
                       "shm_size_bytes": 2147483648, "skip_missing_assets": False}


def _settings_entries(config: SweepConfig) -> dict:
    """The identity's settings entries, computed the way reb_ray.sweep.identity does."""
    from reb_ray.sweep.identity import scoring_identity

    identity = scoring_identity(config, None, [])
    return {k: identity[k] for k in (*SCORED_SETTINGS, "network_allow")}


def _digest(entries: dict) -> str:
    return hashlib.sha256(json.dumps(entries, sort_keys=True, default=str).encode()).hexdigest()


def _frozen_flat_sweep_id(c) -> str:
    """The flat model's `resolved_sweep_id`, frozen: reads flat attributes of `c`."""
    if c.sweep_id:
        return c.sweep_id
    parts: list = [c.suite, c.tasks, sorted(c.agents), c.trials, c.sandbox]
    identities = {name: c.agent_spec(name).identity() for name in sorted(set(c.agents))
                  if c.agent_spec(name).identity() != _shorthand_identity(name)}
    if identities:
        parts.append(identities)
    if c.network_policy != "open":
        parts.append({"network_policy": c.network_policy, "network_allow": sorted(c.network_allow)})
    key = json.dumps(parts, sort_keys=True)
    return f"{c.suite}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"


@pytest.mark.parametrize("name", sorted(FLAT_CONFIGS))
def test_sweep_ids_and_identity_settings_are_those_of_the_flat_model(name):
    config = SweepConfig(**FLAT_CONFIGS[name])
    sweep_id, digest = CAPTURED[name]
    assert config.resolved_sweep_id() == sweep_id
    assert _digest(_settings_entries(config)) == digest
    # The same settings written in sections: the same sweep and the same identity.
    sectioned = SweepConfig.model_validate(config.model_dump())
    assert sectioned.resolved_sweep_id() == sweep_id and _digest(_settings_entries(sectioned)) == digest


def test_the_frozen_flat_function_agrees_on_more_configurations():
    """The flat model's id function over `flat()` gives `resolved_sweep_id` for combinations the
    captured values do not cover (a given sweep id, each policy, each provider)."""
    variants = [dict(sweep_id="mine"), dict(network_policy="registries"), dict(sandbox="podman"),
                dict(network_policy="registries", network_allow=["pypi.org"], tasks="a*", trials=5),
                dict(agents=["codex@gpt-5", "noop"], output="elsewhere", max_concurrent=9, rerun=True)]
    for fields in variants:
        config = SweepConfig(**fields)
        flat = SimpleNamespace(**config.flat(), agent_spec=config.agent_spec)
        assert config.resolved_sweep_id() == _frozen_flat_sweep_id(flat), fields


def test_an_identity_file_of_the_flat_model_resumes_without_drift(tmp_path):
    """An output directory written before sections: its stored settings are the current ones."""
    from reb_ray.sweep.identity import identity_path

    path = identity_path(tmp_path, "researchenvbench-c1199f74")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"identity": CAPTURED_REGISTRIES, "history": []}))
    current = _settings_entries(SweepConfig(**FLAT_CONFIGS["registries"]))
    assert check_identity(tmp_path, "researchenvbench-c1199f74", current, allow_drift=False) == []
    changed = _settings_entries(SweepConfig(**{**FLAT_CONFIGS["registries"], "pids_limit": 2048}))
    assert drifted(CAPTURED_REGISTRIES, changed) == ["pids_limit"]  # `config_drift` names the flat key


def test_flat_and_sectioned_toml_load_the_same(tmp_path):
    flat = tmp_path / "flat.toml"
    flat.write_text('suite = "demo"\nagents = ["noop"]\nsandbox = "local"\nnetwork = "bridge"\noutput = "runs"\n'
                    'pids_limit = 512\nmax_concurrent = 3\nmax_cost_usd = 2.5\nllm_retry_backoff_s = 1.0\n'
                    'keep_environments = "none"\nrerun = true\nsweep_id = "s1"\n')
    sectioned = tmp_path / "sectioned.toml"
    sectioned.write_text('suite = "demo"\nagents = ["noop"]\n[sandbox]\nprovider = "local"\npids_limit = 512\n'
                         '[network]\nname = "bridge"\n[output]\ndir = "runs"\nkeep_environments = "none"\n'
                         '[cluster]\nmax_concurrent = 3\n[llm]\nmax_cost_usd = 2.5\nretry_backoff_s = 1.0\n'
                         '[resume]\nrerun = true\nsweep_id = "s1"\n')
    a, b = load_config(flat, {}), load_config(sectioned, {})
    assert a == b
    assert (a.sandbox.provider, a.network.name, str(a.output.dir), a.sandbox.pids_limit) == ("local", "bridge", "runs", 512)
    assert (a.cluster.max_concurrent, a.llm.retry_backoff_s, a.resume.rerun, a.resolved_sweep_id()) == (3, 1.0, True, "s1")


def test_flat_view_names_every_old_field_and_round_trips():
    config = SweepConfig(**FLAT_CONFIGS["registries"])
    flat = config.flat()
    top = [name for name in SweepConfig.model_fields if name not in SECTIONS]
    assert set(flat) == {*top, *FLAT_KEYS} and "sandbox" in flat and flat["sandbox"] == "docker"
    assert (flat["network_policy"], flat["llm_retry_backoff_s"], flat["output"]) == ("registries", 10.0, config.output.dir)
    assert SweepConfig(**flat) == config
    # Every section field has exactly one flat key.
    assert sorted(FLAT_KEYS.values()) == sorted((s, f) for s, model in SECTIONS.items() for f in model.model_fields)


def test_a_setting_given_flat_and_in_its_section_is_refused():
    with pytest.raises(ValidationError, match="'pids_limit' is given twice: flat and as sandbox.pids_limit"):
        SweepConfig(pids_limit=100, sandbox={"pids_limit": 200})
    assert SweepConfig(pids_limit=100, sandbox={"provider": "local"}).sandbox.pids_limit == 100  # no clash: merged


def test_unknown_keys_fail_in_one_line_naming_them(tmp_path):
    toml = tmp_path / "sweep.toml"
    toml.write_text("pids_limt = 100\n")
    with pytest.raises(RebRayError, match=r"unknown key 'pids_limt'; did you mean 'pids_limit'\?$"):
        load_config(toml, {})
    toml.write_text("[sandbox]\nmemry_bytes = 100\n")
    with pytest.raises(RebRayError, match=r"unknown key 'sandbox.memry_bytes'; did you mean 'memory_bytes'\?$"):
        load_config(toml, {})
    toml.write_text("[sandbx]\nprovider = 'local'\n")
    with pytest.raises(RebRayError, match=r"unknown key 'sandbx'; did you mean 'sandbox'\?$"):
        load_config(toml, {})
    with pytest.raises(ValidationError, match="memry_bytes"):
        SweepConfig(memry_bytes=1)


def test_bad_values_name_the_key_as_written(tmp_path):
    toml = tmp_path / "sweep.toml"
    toml.write_text("pids_limit = 10\n")
    with pytest.raises(RebRayError, match=rf"^{toml}: pids_limit = 10: "):
        load_config(toml, {})
    toml.write_text("[sandbox]\npids_limit = 10\n")
    with pytest.raises(RebRayError, match=rf"^{toml}: sandbox.pids_limit = 10: "):
        load_config(toml, {})
    with pytest.raises(RebRayError, match=r"^flags: --memory-gb = -1: "):
        load_config(None, {"sandbox.memory_bytes": -1})


def test_updated_lands_flat_keys_in_their_sections_and_validates():
    config = SweepConfig(sandbox="local", network="bridge")
    copy = config.updated(rerun=True, pids_limit=256, output="elsewhere", network={"policy": "open"})
    assert (copy.resume.rerun, copy.sandbox.pids_limit, copy.sandbox.provider, str(copy.output.dir)) == (True, 256, "local", "elsewhere")
    assert copy.network.name == "bridge"  # a section table is merged into the current section
    with pytest.raises(ValidationError):
        config.updated(pids_limit=1)
    with pytest.raises(ValidationError, match="registries"):
        config.updated(network_policy="registries")  # the local sandbox has no network of its own


def test_field_paths_cover_the_model():
    paths = SweepConfig.field_paths()
    assert "sandbox.provider" in paths and "network.policy" in paths and "suite" in paths
    assert not any(p in SECTIONS for p in paths)  # a section is never a setting itself
    assert len(paths) == len(set(paths)) == len([n for n in SweepConfig.model_fields if n not in SECTIONS]) + len(FLAT_KEYS)


def test_a_trial_spec_round_trips_its_sectioned_config():
    from reb_ray.models.sweep import TrialSpec
    from reb_ray.suite.load import load_suite

    spec = TrialSpec(sweep_id="s", agent="noop", task=load_suite("demo")[0], trial_index=0,
                     config=SweepConfig(**FLAT_CONFIGS["registries"]))
    again = TrialSpec.model_validate(json.loads(spec.model_dump_json()))
    assert again.config == spec.config and again.config.network.allow == ["pypi.org", "*.pythonhosted.org"]
    assert isinstance(again.agent_spec, AgentSpec)


def test_the_guide_sweep_toml_loads_in_sections(tmp_path):
    """The user guide's sectioned sweep.toml example is valid as written."""
    import re
    from pathlib import Path

    guide = (Path(__file__).resolve().parents[2] / "docs/guide/sweeps.md").read_text()
    section = guide.split("A `sweep.toml` uses `SweepConfig`'s field names", 1)[1]
    example = re.findall(r"```toml\n(.*?)```", section, re.S)[0]
    (tmp_path / "sweep.toml").write_text(example)
    config = load_config(tmp_path / "sweep.toml", {})
    assert "[sandbox]" in example and (config.sandbox.provider, config.cluster.max_concurrent, str(config.output.dir)) == ("docker", 2, "runs")


def test_a_section_that_is_not_a_table_is_named(tmp_path):
    toml = tmp_path / "sweep.toml"
    toml.write_text('cluster = "big"\naddress = "auto"\n')
    with pytest.raises(RebRayError, match=r"'cluster' must be a table of settings, not 'big'$"):
        load_config(toml, {})
    toml.write_text('cluster = "big"\n')
    with pytest.raises(RebRayError, match=rf"^{toml}: cluster = 'big': "):
        load_config(toml, {})
    toml.write_text("resume = 5\n")
    with pytest.raises(RebRayError, match=rf"^{toml}: resume = 5: "):
        load_config(toml, {"rerun": True})
