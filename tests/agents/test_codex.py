"""The `codex` runner: the pinned Codex CLI for real, in a real Docker sandbox with the real
toolchain mounted, against the real scripted endpoint behind the real metering proxy."""

from __future__ import annotations

import json
import tomllib

import pytest

from reb_ray.agents.base import LlmAccess
from reb_ray.agents.codex import KEY_ENV, CodexSession, config_toml
from reb_ray.agents.toolchain import PINS, Toolchain
from reb_ray.errors import InfraError
from reb_ray.llm.apis import RESPONSES
from reb_ray.llm.scripted import script_from
from reb_ray.llm.usage import REPORTED_FIELDS
from reb_ray.testing.llm_session import NO_BUILD, REPORT, VENV, build_script, run_session, transcript_events

MODEL = "gpt-5.1-codex"
#: The venv with numpy that the probes then find, built by the image's pip into a venv made without
#: one (no ensurepip, no byte-compiling: seconds that are the agent's business, not the runner's).
BUILD = (f"python3 -m venv --without-pip {VENV} && python3 -m pip --python {VENV}/bin/python install -q --no-compile "
         f"numpy && {VENV}/bin/python -c 'import numpy'")


def expected_usage(script: dict) -> dict:
    """What the Responses API can carry of the script's sums (no cache writes), as the CLI reports it."""
    total = script_from(script).total_usage().only(REPORTED_FIELDS[RESPONSES]).as_dict()
    return {k: v for k, v in total.items() if v is not None}


def test_the_config_points_a_custom_responses_provider_at_the_proxy():
    config = tomllib.loads(config_toml(LlmAccess("http://172.17.0.1:4000/", "sk-stand-in", "gpt-5", None)))
    provider = config["model_providers"][config["model_provider"]]
    assert config["model_provider"] != "openai" and config["model"] == "gpt-5"
    assert provider == {"name": "reb-ray", "base_url": "http://172.17.0.1:4000/v1", "env_key": KEY_ENV,
                        "wire_api": "responses"}
    assert config["analytics"] == {"enabled": False} and config["shell_environment_policy"] == {"exclude": [KEY_ENV]}
    assert "model" not in tomllib.loads(config_toml(LlmAccess("http://h:1", "k")))  # no model: codex's default
    assert "sk-stand-in" not in config_toml(LlmAccess("http://h:1", "sk-stand-in"))  # the key stays in the env


def test_usage_is_summed_over_turns_and_unknown_when_a_turn_lacks_a_field():
    session = CodexSession()
    for usage in ({"input_tokens": 10, "cached_input_tokens": 4, "cache_write_input_tokens": 0, "output_tokens": 3,
                   "reasoning_output_tokens": 1},
                  {"input_tokens": 20, "cached_input_tokens": 6, "cache_write_input_tokens": 0, "output_tokens": 5}):
        session.fold({"type": "turn.completed", "usage": usage})
    assert session.reported_usage() == {"input_tokens": 30, "cached_input_tokens": 10, "output_tokens": 8}
    assert CodexSession().reported_usage() is None


@pytest.mark.docker
@pytest.mark.agent_cli
def test_a_scripted_session_builds_the_environment(docker_client, sandbox_image, installed_toolchain, real_key):
    """That the probes then find what this CLI built (C1 succeeds, nothing of C0 missing) is the
    sweep's check of the same CLI on the same task (tests/test_sweep_agents.py): probing here too
    ran the same probe phase twice."""
    script = build_script(MODEL, build=BUILD)
    s = run_session(docker_client, sandbox_image, "codex", MODEL, script, probes=False)
    run = s.run
    assert run.exit_code == 0 and not run.timed_out and run.limit is None, run.output[-3000:]
    assert run.agent_version == PINS["codex"].version and run.report_source is None  # the agent's own file
    assert json.loads(s.report) == REPORT
    # The CLI's own usage equals the script's sums, and so does the proxy's meter.
    assert run.reported_usage == expected_usage(script)
    assert {k: s.meter[k] for k in run.reported_usage} == run.reported_usage and s.meter["requests"] == 3
    assert (run.input_tokens, run.output_tokens) == (8800, 133)
    # The transcript is codex's JSON events: both commands ran, and succeeded, in the sandbox.
    events = transcript_events(run)
    commands = [e["item"] for e in events if e["type"] == "item.completed" and e["item"]["type"] == "command_execution"]
    assert [c["exit_code"] for c in commands] == [0, 0] and f"--python {VENV}/bin/python install" in commands[0]["command"]
    assert events[-1]["type"] == "turn.completed"
    assert "exec_command" in s.endpoint["requests"][0]["tools"]
    # The real key: with the proxy only. Not in the agent's commands' environment, nowhere on disk.
    assert s.env_seen is not None and real_key not in s.env_seen
    # ... while the trial's pip settings do reach them (the node's read-only wheel cache as find-links).
    assert KEY_ENV not in s.env_seen and "/opt/reb-ray/pip-cache" in s.env_seen, s.env_seen
    assert s.key_hits == "" and real_key not in run.output + run.transcript.decode()


@pytest.mark.docker
@pytest.mark.agent_cli
def test_without_a_report_file_the_report_is_forced_from_the_last_message(docker_client, sandbox_image,
                                                                          installed_toolchain, real_key):
    final = {"kind": "message", "text": f"Done. The report:\n{json.dumps(REPORT, indent=2)}\n"}
    s = run_session(docker_client, sandbox_image, "codex", MODEL, build_script(MODEL, write_report=False, final=final,
                                                                    build=NO_BUILD), probes=False)
    assert s.run.exit_code == 0, s.run.output[-3000:]
    assert s.run.report_source == "forced_from_output" and json.loads(s.report) == REPORT


@pytest.mark.docker
@pytest.mark.agent_cli
def test_a_hanging_endpoint_hits_the_agent_timeout(docker_client, sandbox_image, installed_toolchain, real_key):
    script = {"model": MODEL, "turns": [{"kind": "tool", "command": "echo started"}, {"kind": "hang"}]}
    s = run_session(docker_client, sandbox_image, "codex", MODEL, script, timeout_s=10, probes=False)
    assert s.run.timed_out and s.run.limit == "agent_timeout_s=10" and s.run.exit_code != 0
    assert 10 <= s.run.wall_time_s < 50 and s.report is None and s.run.report_source is None
    assert s.endpoint["position"] == 2  # the hang was reached: the CLI was waiting on the model


@pytest.mark.docker
def test_a_toolchain_without_codex_is_an_infra_error(docker_client, sandbox_image, tmp_path, real_key):
    empty = Toolchain.current(tmp_path)  # bin/ wrappers, no parts installed
    with pytest.raises(InfraError) as err:
        run_session(docker_client, sandbox_image, "codex", MODEL, build_script(MODEL, build=NO_BUILD), toolchain=empty,
                    probes=False)
    assert err.value.category == "infra_toolchain" and "codex" in str(err.value) and "not installed" in str(err.value)


@pytest.mark.docker
@pytest.mark.agent_cli
def test_a_cli_that_fails_is_a_run_with_a_non_zero_exit_code(docker_client, sandbox_image, installed_toolchain,
                                                              real_key):
    s = run_session(docker_client, sandbox_image, "codex", MODEL, {"model": MODEL, "turns": [{"kind": "error", "status": 401}]},
                    probes=False)
    assert s.run.exit_code not in (0, None) and not s.run.timed_out and s.run.limit is None
    assert s.run.reported_usage is None and s.run.report_source is None  # no turn completed: usage unknown
    assert transcript_events(s.run)[-1]["type"] == "turn.failed" and "401" in s.run.output
