"""get_agent builds an agent from its spec; runners that do not exist yet say so in one line."""

from __future__ import annotations

import pytest

from reb_ray.agents import get_agent
from reb_ray.agents.command import CommandAgent
from reb_ray.agents.heuristic import HeuristicAgent
from reb_ray.agents.noop import NoopAgent
from reb_ray.errors import RebRayError
from reb_ray.models.agent import AgentSpec
from reb_ray.models.sweep import SweepConfig
from reb_ray.sweep.expand import expand


def test_builtin_command_and_class_path_kinds():
    assert isinstance(get_agent("heuristic"), HeuristicAgent) and isinstance(get_agent("noop"), NoopAgent)
    agent = get_agent("tests.helpers.scripted_agents:SilentAgent")
    assert agent.name == "tests.helpers.scripted_agents:SilentAgent" and agent.spec.kind == agent.name
    cmd = get_agent(AgentSpec(name="mine", kind="command", command=["true"], base_url="http://127.0.0.1:9", key_env="MINE_KEY"))
    assert isinstance(cmd, CommandAgent) and cmd.name == "mine" and cmd.uses_toolchain
    assert cmd.credential_names() == ("MINE_KEY",) and not cmd.trusted
    # with an endpoint it is an LLM agent, metered through the proxy; without one it calls no known model
    assert cmd.uses_llm and not cmd.calls_no_model
    plain = get_agent(AgentSpec(name="plain", kind="command", command=["true"]))
    assert not plain.uses_llm and not plain.calls_no_model and plain.credential_names() == ()


def test_every_llm_kind_gets_its_runner():
    from reb_ray.agents.claude_code import ClaudeCodeAgent
    from reb_ray.agents.codex import CodexAgent
    from reb_ray.agents.mini_swe_agent import MiniSweAgent
    from reb_ray.agents.nexau import NexauAgent

    for shorthand, cls in (("codex@gpt-5.1-codex", CodexAgent), ("claude_code@claude-sonnet-4-5", ClaudeCodeAgent),
                           ("mini_swe_agent@gpt-5-mini", MiniSweAgent), ("nexau@gpt-5-mini", NexauAgent)):
        agent = get_agent(shorthand)
        assert type(agent) is cls and agent.name == shorthand and agent.uses_llm and agent.uses_toolchain
        assert not agent.trusted and agent.spec.model == shorthand.split("@")[1]


def test_bad_names_fail_in_one_line():
    with pytest.raises(RebRayError, match="agent 'nope': unknown agent kind 'nope'"):
        get_agent("nope")
    with pytest.raises(RebRayError, match="cannot import module 'no_such_module'"):
        get_agent("no_such_module:Agent")


def test_a_command_agents_key_is_read_on_the_driver_and_never_given_to_its_trials(monkeypatch, tmp_path):
    monkeypatch.setenv("MINE_KEY", "sk-test-1234")
    monkeypatch.delenv("OTHER_KEY", raising=False)
    endpoint = {"kind": "command", "command": ["true"], "base_url": "http://127.0.0.1:9/v1"}
    config = SweepConfig(agent_specs={"mine": {**endpoint, "key_env": "MINE_KEY"}, "plain": {"kind": "command", "command": ["true"]}},
                         agents=["mine", "plain", "noop"], tasks="numpy-trainer", output=tmp_path)
    specs, _skipped = expand(config, image=None)
    # the key goes to the node's proxy (from the driver's environment), not with the trial's spec
    assert {s.agent: s.credentials for s in specs} == {"mine": {}, "plain": {}, "noop": {}}
    assert "sk-test-1234" not in "".join(s.model_dump_json() for s in specs)
    config = SweepConfig(agent_specs={"other": {**endpoint, "key_env": "OTHER_KEY"}}, agents=["other"],
                         tasks="numpy-trainer", output=tmp_path)
    with pytest.raises(RebRayError, match="agent 'other': its key variable OTHER_KEY is not set"):
        expand(config, image=None)


def test_a_sweep_with_an_agent_that_cannot_run_fails_before_any_trial(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    config = SweepConfig(agents=["heuristic", "nexau"], output=tmp_path)
    with pytest.raises(RebRayError, match="agent 'nexau': kind nexau needs a model") as info:
        expand(config, image=None)
    assert "\n" not in str(info.value)
    config = SweepConfig(agents=["heuristic", "codex@gpt-5"], output=tmp_path)
    with pytest.raises(RebRayError, match="its key variable OPENAI_API_KEY is not set"):
        expand(config, image=None)
