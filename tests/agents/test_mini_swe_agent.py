"""The mini_swe_agent runner: the pinned `mini` from the real toolchain, in a real Docker
sandbox, against the real scripted endpoint through the metering proxy on the bridge."""

from __future__ import annotations

import json

import pytest

from reb_ray.agents.mini_swe_agent import reported_usage
from reb_ray.llm.apis import CHAT
from reb_ray.llm.prices import cost_usd
from reb_ray.llm.usage import FIELDS, REPORTED_FIELDS
from reb_ray.testing.llm_session import REAL_KEY, REAL_KEY_ENV, LlmSession

pytestmark = [pytest.mark.docker, pytest.mark.agent_cli]

MODEL = "gpt-5-mini"  # litellm prices it, and so does our price table
ENV = "/opt/envs/numpy-trainer"
REPORT = {"python_path": f"{ENV}/bin/python", "python_version": None, "torch_version": None,
          "cuda_available": None, "gpu_count": None, "ddp_expected_ok": None, "env_tool": "venv",
          "env_name": "numpy-trainer", "notes": "venv with numpy from requirements.txt"}
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


def _turn(command: str, n: int) -> dict:
    # Distinct numbers in every field and turn, so a dropped or swapped one shows in the sums.
    return {"kind": "tool", "command": command, "text": f"Step {n}.",
            "usage": {"input_tokens": 1000 + 100 * n, "cached_input_tokens": 300 + 50 * n,
                      "output_tokens": 40 + n, "reasoning_tokens": 10 + n}}


def build_turns(final: list[str]) -> list[dict]:
    """Create a venv, install numpy into it (the image's pip, without ensurepip's and
    byte-compiling's seconds), then `final` (which writes the report, or not)."""
    steps = [f"python3 -m venv --without-pip {ENV}",
             f"python3 -m pip --python {ENV}/bin/python install -q --no-compile -r requirements.txt",
             f"{ENV}/bin/python -c 'import numpy; print(numpy.__version__)'; pwd; command -v mini || echo toolchain-not-on-path; "
             "echo key=$OPENAI_API_KEY", *final]
    return [_turn(command, n) for n, command in enumerate(steps)]


WRITE_REPORT = f"mkdir -p /opt/scimlopsbench && printf '%s' '{json.dumps(REPORT)}' > /opt/scimlopsbench/report.json"


def spec(**extra) -> dict:
    return {"kind": "mini_swe_agent", "model": MODEL, **extra}


@pytest.fixture
def session(docker_client, sandbox_image, installed_toolchain, monkeypatch):
    monkeypatch.setenv(REAL_KEY_ENV, REAL_KEY)
    made = []

    def make(turns: list[dict], timeout_s: float = 300.0, **spec_extra) -> LlmSession:
        s = LlmSession(docker_client, sandbox_image, spec(**spec_extra), {"model": MODEL, "turns": turns},
                       timeout_s=timeout_s, real_key_env=REAL_KEY_ENV, toolchain=installed_toolchain)
        made.append(s.__enter__())
        return s

    yield make
    for s in made:
        s.__exit__()
        assert s.containers() == []


def test_a_scripted_session_builds_the_env(session):
    """That the probes then find the env (C1 succeeds, nothing of C0 missing) is the sweep's check
    of the same turns (tests/test_sweep_agents.py, `build_turns` imported there): probing here
    too ran the same probe phase twice."""
    s = session(build_turns([WRITE_REPORT, SUBMIT]))
    s.ctx.env["OPENAI_API_KEY"] = REAL_KEY  # what a caller passing the spec's key variable would hand over
    run = s.run()
    assert (run.exit_code, run.timed_out, run.limit) == (0, False, None), run.output[-3000:]
    assert run.agent_version == "2.4.6" and run.report_source is None  # the agent's own file
    assert json.loads(s.report()) == REPORT
    # The CLI's own usage equals the script's sums and the proxy's meter; litellm's price ours.
    expected = s.endpoint.script.total_usage().only(REPORTED_FIELDS[CHAT])
    meter = s.meter()
    assert {f: meter[f] for f in FIELDS} == expected.as_dict()
    assert meter["requests"] == 5
    assert run.reported_usage == {**{k: v for k, v in expected.as_dict().items() if v is not None},
                                  "cost_usd": pytest.approx(cost_usd(MODEL, expected)[0])}
    # The transcript is the trajectory: every command the model ran, with its exit code.
    lines = [json.loads(line) for line in run.transcript.splitlines()]
    assert lines[0]["type"] == "info" and lines[0]["info"]["exit_status"] == "Submitted"
    tools = [m for m in lines if m.get("role") == "tool"]
    # It ran inside the sandbox: the repository root as cwd, the toolchain off the commands' PATH.
    assert len(tools) == 5 and all('"returncode": 0' in m["content"] for m in tools[:4]), tools
    assert "/work/repo" in tools[2]["content"] and "toolchain-not-on-path" in tools[2]["content"]
    assert f"key={s.key}" in tools[2]["content"]  # the stand-in, never the real key
    session_seen = s.endpoint_session()
    assert session_seen["requests"][0]["tools"] == ["bash"]
    assert REAL_KEY not in run.output and REAL_KEY.encode() not in run.transcript
    # The runner's work dir is gone (not part of the environment); the repository is untouched.
    assert s.sandbox.exec(["test", "-e", "/work/.reb-ray-agent/mini_swe_agent"], timeout=30).exit_code == 1


def test_the_report_is_forced_from_the_submission_when_no_file_was_written(session):
    """The report read from the submission is the report file the probes read; that a forced
    report drives the probes like the agent's own is the `command` kind's sweep's check
    (tests/agents/test_command.py), so no environment is built here."""
    printed = f"printf 'COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\\n%s\\n' '{json.dumps(REPORT)}'"
    s = session([_turn("echo building", 0), _turn(printed, 1)])
    run = s.run()
    assert run.exit_code == 0 and run.report_source == "forced_from_output", run.output[-3000:]
    assert json.loads(s.report()) == REPORT


def test_max_turns_stops_the_cli_and_says_so(session):
    # Two commands that run without a venv's or an install's seconds: only they run before the stop.
    s = session([_turn("echo first", 0), _turn("echo second", 1), _turn(WRITE_REPORT, 2), _turn(SUBMIT, 3)], max_turns=2)
    run = s.run()
    assert run.limit == "max_turns=2" and not run.timed_out, run.output[-3000:]
    assert s.meter()["requests"] == 2 and s.report() is None
    assert json.loads(run.transcript.splitlines()[0])["info"]["exit_status"] == "LimitsExceeded"


def test_a_hanging_endpoint_hits_the_agent_timeout(session):
    # The limit must really elapse, so it is short; but the CLI gets the limit less the runner's
    # own reserve (AFTER_CLI_S), and on a loaded machine mini's start-up (litellm's imports) took
    # over 5 s: 20 s leaves it time for the first call, whose trajectory the last line checks.
    s = session([_turn("true", 0), {"kind": "hang"}], timeout_s=20)
    run = s.run()
    assert run.timed_out and run.limit == "agent_timeout_s=20", run.output[-3000:]
    assert run.wall_time_s < 20 + 20
    # The trajectory saved before the hang is kept, with the first call's usage.
    assert run.reported_usage is not None and run.reported_usage["input_tokens"] == 1000


def test_reported_usage_reads_the_trajectory_and_leaves_unknowns_null():
    priced = {"info": {"model_stats": {"instance_cost": 0.25, "api_calls": 2}}, "messages": [
        {"role": "system", "content": "s"},
        {"role": "assistant", "extra": {"cost": 0.1, "response": {"usage": {
            "prompt_tokens": 100, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 40},
            "completion_tokens_details": {"reasoning_tokens": 3}}}}},
        {"role": "assistant", "extra": {"cost": 0.15, "response": {"usage": {"prompt_tokens": 200, "completion_tokens": 9}}}},
    ]}
    assert reported_usage(priced) == {"input_tokens": 300, "output_tokens": 16, "cached_input_tokens": 40,
                                      "reasoning_tokens": 3, "cost_usd": 0.25}
    unpriced = json.loads(json.dumps(priced))
    unpriced["messages"][2]["extra"]["cost"] = 0.0  # litellm could not price it: unknown, not 0.15
    assert reported_usage(unpriced)["cost_usd"] is None
    assert reported_usage({"messages": [{"role": "system"}]}) is None



def test_outside_docker_it_fails_in_one_line():
    from reb_ray.agents import get_agent
    from reb_ray.agents.base import AgentContext, LlmAccess
    from reb_ray.errors import RebRayError
    from reb_ray.sandbox import SandboxConfig, open_sandbox

    agent = get_agent("mini_swe_agent@gpt-5-mini")
    with open_sandbox("local", SandboxConfig(sweep_id="test", trial_id="mini-local"), trusted=True) as local:
        ctx = AgentContext("/tmp/repo", "/tmp/report.json", 10, llm=LlmAccess("http://127.0.0.1:1", "sk-x", "gpt-5-mini"))
        with pytest.raises(RebRayError, match="kind mini_swe_agent runs in the docker sandbox only"):
            agent.run(local, ctx)


def test_without_a_model_it_fails_before_starting(session):
    from reb_ray.errors import RebRayError

    s = session(build_turns([SUBMIT]), model=None)
    with pytest.raises(RebRayError, match=r"kind mini_swe_agent needs a model \(`mini_swe_agent@MODEL`"):
        s.run()
    assert s.meter()["requests"] == 0
