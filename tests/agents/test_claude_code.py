"""The `claude_code` runner: the pinned Claude Code CLI for real, in a real Docker sandbox with the
real toolchain mounted, against the real scripted endpoint behind the real metering proxy.

Two of its cases are trials of tests/test_sweep_agents.py, which ran the same CLI the same way a
second time: the agent timeout (the hanging-endpoint sweep) and the report forced from the result
text when no file was written (the liar, whose last message holds the report); the rows carry
the runner's own result (exit code, wall time, limit, report source)."""

from __future__ import annotations

import json

import pytest

from reb_ray.agents.claude_code import ClaudeSession
from reb_ray.agents.toolchain import PINS
from reb_ray.llm.apis import ANTHROPIC
from reb_ray.llm.scripted import script_from
from reb_ray.llm.usage import REPORTED_FIELDS
from reb_ray.testing.llm_session import NO_BUILD, REPORT, VENV, build_script, run_session, transcript_events

MODEL = "claude-sonnet-4-5"
#: The venv with numpy that the probes then find, built by the image's pip into a venv made without
#: one (no ensurepip, no byte-compiling: seconds that are the agent's business, not the runner's).
BUILD = (f"python3 -m venv --without-pip {VENV} && python3 -m pip --python {VENV}/bin/python install -q --no-compile "
         f"numpy && {VENV}/bin/python -c 'import numpy'")
#: The report contract's shape, enough for claude's --json-schema (what is checked is the mechanism).
SCHEMA = {"type": "object", "required": list(REPORT), "properties": {
    "python_path": {"type": "string"}, "python_version": {"type": ["string", "null"]},
    "torch_version": {"type": ["string", "null"]}, "cuda_available": {"type": ["boolean", "null"]},
    "gpu_count": {"type": ["integer", "null"]}, "ddp_expected_ok": {"type": ["boolean", "null"]},
    "env_tool": {"type": "string"}, "env_name": {"type": ["string", "null"]}, "notes": {"type": ["string", "null"]}}}


def expected_usage(script: dict) -> dict:
    """What the Messages API can carry of the script's sums (no reasoning count)."""
    total = script_from(script).total_usage().only(REPORTED_FIELDS[ANTHROPIC]).as_dict()
    return {k: v for k, v in total.items() if v is not None}


def test_the_result_usage_is_converted_to_input_including_cache_reads_and_writes():
    session = ClaudeSession()
    session.fold({"type": "result", "subtype": "success", "total_cost_usd": 0.25, "result": "ok",
                  "usage": {"input_tokens": 100, "cache_read_input_tokens": 700, "cache_creation_input_tokens": 50,
                            "output_tokens": 40, "output_tokens_details": {"thinking_tokens": 0}}})
    assert session.reported_usage() == {"input_tokens": 850, "cached_input_tokens": 700, "cache_write_tokens": 50,
                                        "output_tokens": 40, "cost_usd": 0.25}
    assert ClaudeSession().reported_usage() is None  # no result event: unknown, never 0
    assert session.final_report() is None  # "ok" holds no JSON object


def test_the_report_comes_from_structured_output_then_the_result_text_then_the_last_assistant_text():
    session = ClaudeSession()
    session.fold({"type": "assistant", "message": {"content": [{"type": "text", "text": 'so far {"python_path": "/a"}'}]}})
    assert session.final_report() == {"python_path": "/a"}  # no result yet (a killed CLI)
    session.fold({"type": "result", "result": 'Done.\n{"python_path": "/b"}'})
    assert session.final_report() == {"python_path": "/b"}
    session.fold({"type": "result", "result": "Done.", "structured_output": {"python_path": "/c"}})
    assert session.final_report() == {"python_path": "/c"}


@pytest.mark.docker
@pytest.mark.agent_cli
def test_a_scripted_session_builds_the_environment(docker_client, sandbox_image, installed_toolchain, real_key):
    """That the probes then find what this CLI built (C1 succeeds, nothing of C0 missing) is the
    sweep's check of the same CLI on the same task (tests/test_sweep_agents.py): probing here too
    ran the same probe phase twice."""
    script = build_script(MODEL, build=BUILD)
    s = run_session(docker_client, sandbox_image, "claude_code", MODEL, script, probes=False)
    run = s.run
    assert run.exit_code == 0 and not run.timed_out and run.limit is None, run.output[-3000:]
    assert run.agent_version == PINS["claude_code"].version and run.report_source is None  # the agent's own file
    assert json.loads(s.report) == REPORT
    # The CLI's own usage equals the script's sums, and so does the proxy's meter; claude knows
    # this model's list price, which agrees with our price table.
    usage = dict(run.reported_usage)
    assert usage.pop("cost_usd") == pytest.approx(s.meter["cost_usd"])
    assert usage == expected_usage(script)
    assert {k: s.meter[k] for k in usage} == usage and s.meter["requests"] == 3
    # The transcript is claude's stream-json events: both Bash calls ran, without error.
    events = transcript_events(run)
    results = [b for e in events if e["type"] == "user" for b in e["message"]["content"] if b.get("type") == "tool_result"]
    assert [r["is_error"] for r in results] == [False, False]
    assert events[-1]["type"] == "result" and events[-1]["num_turns"] == 3
    assert "Bash" in s.endpoint["requests"][0]["tools"]
    # The real key: with the proxy only. The commands saw the stand-in (claude's own variable), HOME untouched.
    assert s.env_seen is not None and real_key not in s.env_seen and "HOME=/root" in s.env_seen
    assert s.key_hits == "" and real_key not in run.output + run.transcript.decode()


@pytest.mark.docker
@pytest.mark.agent_cli
def test_given_a_json_schema_the_report_is_its_structured_output(docker_client, sandbox_image, installed_toolchain,
                                                                 real_key):
    # --json-schema (opt-in through extra_args) offers a StructuredOutput tool; the session ends
    # when the model calls it, and the result event carries the object.
    script = {"model": MODEL, "turns": [{"kind": "tool", "command": NO_BUILD},
                                        {"kind": "tool", "tool": "StructuredOutput", "arguments": REPORT}]}
    s = run_session(docker_client, sandbox_image, "claude_code", MODEL, script, probes=False,
                    extra_args=("--json-schema", json.dumps(SCHEMA)))
    assert s.run.exit_code == 0, s.run.output[-3000:]
    assert transcript_events(s.run)[-1]["structured_output"] == REPORT and s.endpoint["position"] == 2
    assert s.run.report_source == "forced_from_output" and json.loads(s.report) == REPORT


@pytest.mark.docker
@pytest.mark.agent_cli
def test_its_max_turns_ends_the_session_and_the_limit_says_so(docker_client, sandbox_image, installed_toolchain,
                                                              real_key):
    s = run_session(docker_client, sandbox_image, "claude_code", MODEL, build_script(MODEL, build=NO_BUILD),
                    max_turns=1, probes=False)
    assert s.run.limit == "max_turns=1" and not s.run.timed_out, s.run.output[-3000:]
    assert s.endpoint["position"] == 1 and s.report is None  # one model turn, the report never written


@pytest.mark.docker
@pytest.mark.agent_cli
def test_a_cli_that_fails_is_a_run_with_a_non_zero_exit_code(docker_client, sandbox_image, installed_toolchain,
                                                              real_key):
    s = run_session(docker_client, sandbox_image, "claude_code", MODEL,
                    {"model": MODEL, "turns": [{"kind": "error", "status": 401}]}, probes=False)
    assert s.run.exit_code not in (0, None) and not s.run.timed_out and s.run.limit is None
    result = transcript_events(s.run)[-1]
    assert result["type"] == "result" and result["is_error"] and s.run.report_source is None
