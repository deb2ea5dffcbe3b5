"""Agent specs: shorthand, [agents.NAME] tables, defaults per kind, one-line errors, sweep ids."""

from __future__ import annotations

import hashlib
import json

import pytest
from pydantic import ValidationError

from reb_ray.cli.sweep import load_config
from reb_ray.errors import RebRayError
from reb_ray.models.agent import AgentSpec
from reb_ray.models.sweep import SweepConfig


def test_shorthand_gives_kind_model_and_the_vendor_defaults():
    spec = AgentSpec.from_shorthand("claude_code@claude-sonnet-4-5")
    assert (spec.name, spec.kind, spec.model) == ("claude_code@claude-sonnet-4-5", "claude_code", "claude-sonnet-4-5")
    assert (spec.base_url, spec.key_env) == ("https://api.anthropic.com", "ANTHROPIC_API_KEY")
    codex = AgentSpec.from_shorthand("codex@gpt-5.1-codex")
    assert (codex.base_url, codex.key_env) == ("https://api.openai.com/v1", "OPENAI_API_KEY")
    plain = AgentSpec.from_shorthand("heuristic")
    assert (plain.name, plain.kind, plain.model, plain.key_env) == ("heuristic", "heuristic", None, None)
    # key_env = "": no key (TOML has no null), not the vendor's variable.
    assert AgentSpec(name="local", kind="codex", base_url="http://127.0.0.1:8000", key_env="").key_env is None
    cls = AgentSpec.from_shorthand("tests.helpers.scripted_agents:SilentAgent")
    assert cls.kind == cls.name == "tests.helpers.scripted_agents:SilentAgent"


@pytest.mark.parametrize("text, message", [
    ("codx@gpt-5", "unknown agent kind 'codx'"),
    ("codex@", "empty model"),
    ("not a kind", "unknown agent kind"),
])
def test_bad_shorthand_is_rejected(text, message):
    with pytest.raises((ValidationError, ValueError), match=message):
        AgentSpec.from_shorthand(text)


def test_command_kind_needs_an_argv_template_with_known_placeholders():
    with pytest.raises(ValidationError, match="needs a command"):
        AgentSpec(name="c", kind="command")
    with pytest.raises(ValidationError, match=r"unknown placeholder \{prompt\}"):
        AgentSpec(name="c", kind="command", command=["agent", "{prompt}"])
    with pytest.raises(ValidationError, match="only kind 'command' takes a command"):
        AgentSpec(name="c", kind="codex", command=["agent"])
    spec = AgentSpec(name="c", kind="command", command=["agent", "--p={prompt_file}", "{repo_root}", "{report_path}", '{"k": 1}'])
    assert spec.render_command("/p.md", "/work/repo", "/r.json") == ["agent", "--p=/p.md", "/work/repo", "/r.json", '{"k": 1}']


def test_a_command_agents_key_and_proxy_url_need_its_base_url():
    with pytest.raises(ValidationError, match="key_env MY_KEY needs base_url: the real key is held by the node's metering proxy"):
        AgentSpec(name="c", kind="command", command=["agent"], key_env="MY_KEY")
    with pytest.raises(ValidationError, match=r"\{llm_base_url\} in '--url=\{llm_base_url\}' needs base_url"):
        AgentSpec(name="c", kind="command", command=["agent", "--url={llm_base_url}"])
    with pytest.raises(ValidationError, match=r"\{llm_base_url\} in '\{llm_base_url\}/v1' needs base_url"):
        AgentSpec(name="c", kind="command", command=["agent"], env={"OPENAI_BASE_URL": "{llm_base_url}/v1"})
    spec = AgentSpec(name="c", kind="command", command=["agent", "--url={llm_base_url}", "{report_path}"],
                     base_url="https://api.example.com/v1", key_env="MY_KEY",
                     env={"OPENAI_BASE_URL": "{llm_base_url}", "OTHER": "{not_a_placeholder}"})
    assert spec.render_command("/p.md", "/work/repo", "/r.json", "http://172.17.0.1:9000/v1") == [
        "agent", "--url=http://172.17.0.1:9000/v1", "/r.json"]
    assert spec.render_command("/p.md", "/work/repo", "/r.json") == ["agent", "--url={llm_base_url}", "/r.json"]
    assert spec.render_env("http://172.17.0.1:9000/v1") == {"OPENAI_BASE_URL": "http://172.17.0.1:9000/v1",
                                                             "OTHER": "{not_a_placeholder}"}
    assert AgentSpec(name="c", kind="command", command=["agent"], key_env="").key_env is None  # no key at all


def test_toml_agent_tables_are_named_specs_in_file_order(tmp_path):
    path = tmp_path / "sweep.toml"
    path.write_text('''
[agents.sonnet]
kind = "claude_code"
model = "claude-sonnet-4-5"
max_turns = 40
max_cost_usd = 1.5
max_concurrent = 4
[agents.heuristic]
[agents.mine]
kind = "command"
command = ["my-agent", "{prompt_file}"]
report_mode = "output"
base_url = "https://api.example.com/v1"
key_env = "MY_KEY"
''')
    config = load_config(path, {})
    assert config.agents == ["sonnet", "heuristic", "mine"]
    sonnet = config.agent_spec("sonnet")
    assert (sonnet.kind, sonnet.model, sonnet.max_turns, sonnet.max_cost_usd, sonnet.max_concurrent) == (
        "claude_code", "claude-sonnet-4-5", 40, 1.5, 4)
    assert config.agent_spec("heuristic").kind == "heuristic"
    assert config.agent_spec("mine").report_mode == "output" and config.agent_spec("mine").key_env == "MY_KEY"
    # --agents picks from the tables and adds shorthands
    assert load_config(path, {"agents": ["mine", "codex@gpt-5"]}).agent_spec("codex@gpt-5").model == "gpt-5"


@pytest.mark.parametrize("body, expected", [
    ('[agents.s]\nkind = "claude_cod"\n', "{path}: agents.s.kind = 'claude_cod': unknown agent kind 'claude_cod'"),
    ('[agents.s]\nkind = "codex"\nmax_turns = 0\n', "{path}: agents.s.max_turns = 0: Input should be greater than or equal to 1"),
    ('[agents.s]\nkind = "codex"\nmodle = "x"\n', "{path}: unknown key 'agents.s.modle'; did you mean 'model'?"),
    ('[agents.s]\nkind = "command"\n', "{path}: agents.s = "),
])
def test_toml_table_errors_are_one_line_naming_file_field_value(tmp_path, body, expected):
    path = tmp_path / "sweep.toml"
    path.write_text(body)
    with pytest.raises(RebRayError) as info:
        load_config(path, {})
    message = str(info.value)
    assert message.startswith(expected.format(path=path)) and "\n" not in message, message


def test_flag_errors_name_the_flag_and_the_bad_agent():
    with pytest.raises(RebRayError) as info:
        load_config(None, {"agents": ["heuristic", "codx@gpt-5"]})
    assert str(info.value).startswith("flags: --agents = ") and "agent 'codx@gpt-5'" in str(info.value)


def _legacy_sweep_id(suite, tasks, agents, trials, sandbox) -> str:
    """The sweep id formula before agent specs existed (resume must keep finding old sweeps)."""
    key = json.dumps([suite, tasks, sorted(agents), trials, sandbox])
    return f"{suite}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"


def test_plain_agent_names_keep_their_old_sweep_ids():
    for agents in (["heuristic", "noop"], ["codex@gpt-5", "tests.helpers.scripted_agents:SilentAgent"]):
        assert SweepConfig(agents=agents).resolved_sweep_id() == _legacy_sweep_id("demo", None, agents, 1, "docker")


def _table_config(**fields) -> SweepConfig:
    spec = {"kind": "codex", "model": "gpt-5", **fields}
    return SweepConfig(agent_specs={"coder": spec}, agents=["coder"])


def test_the_model_and_limits_are_part_of_the_sweep_id_but_the_endpoint_is_not():
    base = _table_config().resolved_sweep_id()
    assert _table_config(model="gpt-5-mini").resolved_sweep_id() != base
    assert _table_config(max_turns=10).resolved_sweep_id() != base
    assert _table_config(extra_args=["--fast"]).resolved_sweep_id() != base
    # F18: a moved endpoint (another port), another key variable or rate limit is the same sweep
    assert _table_config(base_url="http://172.17.0.1:41234/v1").resolved_sweep_id() == base
    assert _table_config(key_env="OTHER_KEY", max_concurrent=3).resolved_sweep_id() == base


def test_trial_spec_resolves_its_agent_spec_by_name():
    from reb_ray.models.sweep import TrialSpec
    from reb_ray.suite.load import load_suite

    config = _table_config()
    spec = TrialSpec(sweep_id="s", agent="coder", task=load_suite("demo")[0], trial_index=0, config=config)
    assert spec.agent_spec.model == "gpt-5" and spec.trial_id.startswith("coder/")
