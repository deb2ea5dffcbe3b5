"""The nexau runner: NexAU from a source checkout, installed into the real toolchain, in a
real Docker sandbox, against the real scripted endpoint through the metering proxy.

NexAU is not on PyPI: the tests marked `nexau_src` need a checkout named by REB_RAY_NEXAU_SRC
(e.g. `git clone https://github.com/nex-agi/NexAU`). Without it they are deselected by design
and the run says so in its summary (tests/conftest.py); with the variable set they install
NexAU into the toolchain (once, `reb-ray agents install --nexau-src`) and fail, never skip,
when that does not work. The tests without the marker run everywhere.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from reb_ray.agents.nexau import parse_events, reported_usage
from reb_ray.agents.toolchain import Toolchain
from reb_ray.errors import InfraError
from reb_ray.llm.apis import CHAT
from reb_ray.llm.usage import FIELDS, REPORTED_FIELDS
from reb_ray.testing.llm_session import REAL_KEY, REAL_KEY_ENV, LlmSession

MODEL = "gpt-5-mini"
ENV = "/opt/envs/numpy-trainer"
REPORT = {"python_path": f"{ENV}/bin/python", "python_version": None, "torch_version": None,
          "cuda_available": None, "gpu_count": None, "ddp_expected_ok": None, "env_tool": "venv",
          "env_name": "numpy-trainer", "notes": "venv with numpy from requirements.txt"}
SHELL = "run_shell_command"


def _usage(n: int) -> dict:
    return {"input_tokens": 1000 + 100 * n, "cached_input_tokens": 300 + 50 * n,
            "output_tokens": 40 + n, "reasoning_tokens": 10 + n}


def build_turns(final: list[dict]) -> list[dict]:
    """Create a venv, install numpy, check it (shell tool calls NexAU executes), then `final`."""
    steps = [f"python3 -m venv {ENV}", f"{ENV}/bin/pip install -q -r requirements.txt",
             f"{ENV}/bin/python -c 'import numpy; print(numpy.__version__)'; pwd; command -v nexau || echo toolchain-not-on-path; "
             "echo key=${OPENAI_API_KEY:-unset}; ls -d ~/.nexau 2>/dev/null || echo no-nexau-home"]
    turns = [{"kind": "tool", "tool": SHELL, "command": c, "text": f"Step {n}.", "usage": _usage(n)} for n, c in enumerate(steps)]
    return turns + [{**turn, "usage": _usage(len(steps) + i)} for i, turn in enumerate(final)]


WRITE_REPORT = {"kind": "tool", "tool": "write_file",
                "arguments": {"file_path": "/opt/scimlopsbench/report.json", "content": json.dumps(REPORT)}}
DONE = {"kind": "message", "text": "The environment is ready; the report is written."}


@pytest.fixture(scope="session")
def nexau_toolchain(installed_toolchain, docker_client, sandbox_image) -> Toolchain:
    """The node's toolchain with NexAU installed from $REB_RAY_NEXAU_SRC (a no-op when it is)."""
    from reb_ray.agents.toolchain_install import install

    src = os.environ.get("REB_RAY_NEXAU_SRC")
    if not src:
        pytest.fail("REB_RAY_NEXAU_SRC is not set: name a NexAU checkout to run the nexau_src tests")
    install(["nexau"], installed_toolchain, image=sandbox_image, client=docker_client, nexau_src=Path(src))
    return installed_toolchain


@pytest.fixture
def session(docker_client, sandbox_image, monkeypatch, request):
    monkeypatch.setenv(REAL_KEY_ENV, REAL_KEY)
    made = []

    def make(turns: list[dict], toolchain: Toolchain, timeout_s: float = 300.0, **spec_extra) -> LlmSession:
        s = LlmSession(docker_client, sandbox_image, {"kind": "nexau", "model": MODEL, **spec_extra},
                       {"model": MODEL, "turns": turns}, timeout_s=timeout_s, real_key_env=REAL_KEY_ENV, toolchain=toolchain)
        made.append(s.__enter__())
        return s

    yield make
    for s in made:
        s.__exit__()
        assert s.containers() == []


@pytest.mark.docker
def test_without_nexau_installed_the_kind_fails_at_once_saying_how_to_install(session, tmp_path):
    s = session(build_turns([DONE]), Toolchain.current(tmp_path))  # a toolchain without the nexau part
    with pytest.raises(InfraError) as info:
        s.run()
    assert info.value.category == "infra_toolchain"
    assert "nexau is not installed in the agent toolchain: run `reb-ray agents install --kinds nexau --nexau-src DIR`" \
        in str(info.value) and "\n" not in str(info.value)
    assert s.meter()["requests"] == 0


def test_reported_usage_converts_nexau_counts_and_skips_a_torn_line():
    raw = (b'{"type": "start", "nexau_version": "0.4.1"}\n'
           b'{"type": "model_call", "usage": {"input_tokens": 700, "cache_read_tokens": 300, "cache_creation_tokens": 0,'
           b' "completion_tokens": 40, "reasoning_tokens": 10}}\n'
           b'{"type": "model_call", "usage": {"input_tokens": 200, "cache_read_tokens": 1000, "completion_tokens": 8}}\n'
           b'{"type": "tool", "na')
    events = parse_events(raw)
    assert [e["type"] for e in events] == ["start", "model_call", "model_call"]
    assert reported_usage(events) == {"input_tokens": 2200, "cached_input_tokens": 1300, "output_tokens": 48,
                                      "reasoning_tokens": 10}
    assert reported_usage(events[:1]) is None


@pytest.mark.nexau_src
@pytest.mark.docker
def test_a_scripted_session_builds_the_env_and_the_probes_pass(session, nexau_toolchain):
    s = session(build_turns([WRITE_REPORT, DONE]), nexau_toolchain)
    s.ctx.env["OPENAI_API_KEY"] = REAL_KEY  # what a caller passing the spec's key variable would hand over
    run = s.run()
    assert (run.exit_code, run.timed_out, run.limit) == (0, False, None), run.output[-3000:]
    assert run.agent_version == "0.4.1" and run.report_source is None
    assert json.loads(s.report()) == REPORT
    expected = s.endpoint.script.total_usage().only(REPORTED_FIELDS[CHAT])
    meter = s.meter()
    assert meter["requests"] == 5 and {f: meter[f] for f in FIELDS} == expected.as_dict()
    assert run.reported_usage == {k: v for k, v in expected.as_dict().items() if v is not None}  # NexAU's own counts
    events = parse_events(run.transcript)
    tools = [e for e in events if e["type"] == "tool"]
    assert [t["name"] for t in tools] == [SHELL, SHELL, SHELL, "write_file"]
    assert '"exit_code": 0' in tools[1]["output"] and "/work/repo" in tools[2]["output"]
    assert "toolchain-not-on-path" in tools[2]["output"] and "key=unset" in tools[2]["output"]  # the real key stays out
    assert "no-nexau-home" in tools[2]["output"]
    assert events[-1] == {"type": "end", "stop_reason": "NO_MORE_TOOL_CALLS", "response": DONE["text"]}
    assert REAL_KEY.encode() not in run.transcript and REAL_KEY not in run.output
    assert s.sandbox.exec(["test", "-e", "/work/.reb-ray-agent/nexau"], timeout=30).exit_code == 1
    row = s.probe()
    assert row["c1_status"] == "success" and row["c0_missing"] == 0, row


@pytest.mark.nexau_src
@pytest.mark.docker
def test_the_report_is_forced_from_the_final_message_when_no_file_was_written(session, nexau_toolchain):
    final = {"kind": "message", "text": f"Done. The report:\n{json.dumps(REPORT)}"}
    s = session(build_turns([final]), nexau_toolchain)
    run = s.run()
    assert run.exit_code == 0 and run.report_source == "forced_from_output", run.output[-3000:]
    assert json.loads(s.report()) == REPORT and s.probe()["c1_status"] == "success"


@pytest.mark.nexau_src
@pytest.mark.docker
def test_max_turns_stops_nexau_and_says_so(session, nexau_toolchain):
    s = session(build_turns([WRITE_REPORT, DONE]), nexau_toolchain, max_turns=2)
    run = s.run()
    assert run.limit == "max_turns=2" and not run.timed_out, run.output[-3000:]
    assert s.meter()["requests"] == 2 and s.report() is None


@pytest.mark.nexau_src
@pytest.mark.docker
def test_a_hanging_endpoint_hits_the_agent_timeout(session, nexau_toolchain):
    s = session([{"kind": "tool", "tool": SHELL, "command": "true", "usage": _usage(0)}, {"kind": "hang"}],
                nexau_toolchain, timeout_s=25)
    run = s.run()
    assert run.timed_out and run.limit == "agent_timeout_s=25", run.output[-3000:]
    assert run.wall_time_s < 25 + 20
    assert run.reported_usage == {"input_tokens": 1000, "cached_input_tokens": 300, "output_tokens": 40,
                                  "reasoning_tokens": 10}  # recorded before the hang, kept after the kill
