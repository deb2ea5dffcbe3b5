"""trajectory.json per attempt: a real trial (run_trial, the local sandbox, the demo task) writes
its ATIF file beside its logs and names it in the row; the file conforms to the validator, its
steps are the execs the agent ran (and the commands an exec announced), its credential is
masked; `trial show` and the viewer read it. NexAU's recorder events and the heuristic's
announced commands become steps."""

from __future__ import annotations

import json
import time

import pytest

from reb_ray.agents.base import Agent, AgentContext, AgentRun
from reb_ray.llm.atif import trajectory, validate
from reb_ray.trial.atif_file import announced, exec_transcript
from tests.viewer.runs import lines, request_log

KEY = "sk-steps-0123456789abcdef"
#: What the heuristic prints around each command it runs (reb_ray/agents/heuristic_script.py).
ANNOUNCING = ("[heuristic] reading requirements.txt\n[heuristic] $ python3 -m venv /opt/envs/heuristic\n"
              "[heuristic] exit 0\n[heuristic] $ /opt/envs/heuristic/bin/pip install nosuchpkg\n"
              "ERROR: No matching distribution found for nosuchpkg\n[heuristic] exit 1\n"
              "[heuristic] $ /opt/envs/heuristic/bin/python -c 'import numpy'\n")


class StepsAgent(Agent):
    """Three execs: one announcing two commands the way the heuristic does and printing the
    trial's credential, one that fails, one that writes the report naming the host's python3."""

    name = "steps"
    trusted = True

    def run(self, sandbox, ctx: AgentContext) -> AgentRun:
        started = time.monotonic()
        sandbox.exec(["sh", "-c", f"printf '%s' \"$1\"; echo key $REB_TEST_STEPS_KEY", "agent", ANNOUNCING],
                     timeout=60, env=ctx.env)
        sandbox.exec(["sh", "-c", "echo no such thing >&2; exit 3"], timeout=60, env=ctx.env)
        report = json.dumps({"python_path": "/usr/bin/python3"})
        result = sandbox.exec(["sh", "-c", f"mkdir -p \"$(dirname $1)\" && printf '%s' '{report}' > \"$1\"", "agent",
                               ctx.report_path], timeout=60, env=ctx.env)
        return AgentRun.from_exec(result, ctx.timeout_s, started)


@pytest.fixture(scope="module")
def trial_run(tmp_path_factory):
    from reb_ray.models.sweep import SweepConfig, TrialSpec
    from reb_ray.results.parquet_sink import ParquetSink
    from reb_ray.results.read import read_trials
    from reb_ray.suite.load import load_suite
    from reb_ray.trial.run import run_trial

    out = tmp_path_factory.mktemp("atif") / "runs"
    config = SweepConfig(sandbox="local", output=out, wheelhouses=[], pip_cache=False)
    spec = TrialSpec(sweep_id="atif", agent=f"{__name__}:StepsAgent", task=load_suite("demo")[0], trial_index=0,
                     config=config, credentials={"REB_TEST_STEPS_KEY": KEY})
    outcome = run_trial(spec)
    ParquetSink(out).write([outcome.trial], outcome.stages)
    [row] = read_trials(out).to_pylist()
    return out, row


def test_a_trial_writes_its_trajectory_json_beside_its_logs(trial_run, slow_process):
    out, row = trial_run
    assert row["atif_path"] == f"artifacts/sweep_id=atif/{row['trial_id'].replace('/', '%2F').replace(':', '%3A')}/1/trajectory.json"
    text = (out / row["atif_path"]).read_text()
    assert KEY not in text and "key ***" in text  # masked as in the rows and logs
    doc = json.loads(text)
    assert validate(doc) == []
    steps = doc["steps"]
    commands = [(s["tool_calls"][0]["arguments"]["command"], s["observation"]["results"][0].get("extra", {}).get("exit_code"),
                 (s.get("extra") or {}).get("within")) for s in steps[2:]]
    assert commands[0][0].startswith("sh -c ") and commands[0][1:] == (0, None)
    # The first exec announced three commands: each a step of its own, within the exec's call.
    assert commands[1:4] == [("python3 -m venv /opt/envs/heuristic", 0, "cmd-1"),
                             ("/opt/envs/heuristic/bin/pip install nosuchpkg", 1, "cmd-1"),
                             ("/opt/envs/heuristic/bin/python -c 'import numpy'", None, "cmd-1")]
    assert steps[4]["observation"]["results"][0]["content"] == "ERROR: No matching distribution found for nosuchpkg"
    assert commands[4][1] == 3 and "no such thing" in steps[6]["observation"]["results"][0]["content"]
    assert commands[5][1] == 0 and len(steps) == 8  # the prompt's two parts, three execs, three announced commands
    # The prompt as the agent got it: its system part, then its task part naming the report path.
    assert [s["source"] for s in steps[:2]] == ["system", "user"] and "report.json" in steps[1]["message"]
    # An agent that calls no model: no step has metrics, and the totals are unknown (not 0).
    assert not any("metrics" in s for s in steps)
    assert doc["final_metrics"] == {"total_steps": 8}
    assert doc["session_id"] == f"atif/{row['trial_id']}/1" and doc["extra"]["status"] == row["status"]


def test_trial_show_and_the_viewer_read_the_file(trial_run, monkeypatch, slow_process):
    from analysis.trial_view import show_trial
    from reb_ray.viewer.data import Run
    from reb_ray.viewer.trajectories import of_attempt

    out, row = trial_run
    shown = show_trial(out, row["trial_id"])
    assert f"steps    8 in {row['atif_path']} (ATIF)" in shown
    assert "[2] step 5 $ /opt/envs/heuristic/bin/pip install nosuchpkg\n      exit 1  ERROR: No matching" in shown
    # The viewer reads the attempt's own file, not a rebuild: a mark put in the file shows.
    doc = json.loads((out / row["atif_path"]).read_text())
    doc["extra"]["mark"] = "read from the file"
    (out / row["atif_path"]).write_text(json.dumps(doc))
    assert of_attempt(Run(out), row)["extra"]["mark"] == "read from the file"
    # Gone (an old run, or a lost file): built again from what is stored, the transcript here none.
    (out / row["atif_path"]).unlink()
    rebuilt = of_attempt(Run(out), row)
    assert "mark" not in rebuilt["extra"] and validate(rebuilt) == []


def test_nexau_events_become_steps_with_their_requests():
    events = lines(
        {"type": "start", "nexau_version": "0.3.1", "python": "3.11.2"},
        {"type": "model_call", "iteration": 1, "text": "Looking around.",
         "tool_calls": [{"name": "run_shell_command", "arguments": {"command": "ls"}},
                        {"name": "read_file", "arguments": {"path": "setup.py"}}],
         "usage": {"input_tokens": 10, "output_tokens": 1}},
        {"type": "tool", "name": "read_file", "input": {"path": "setup.py"}, "output": "from setuptools import setup"},
        {"type": "tool", "name": "run_shell_command", "input": {"command": "ls"}, "output": "setup.py"},
        {"type": "model_call", "iteration": 2, "text": "Done.", "tool_calls": [], "usage": {"input_tokens": 20}},
        {"type": "end", "stop_reason": "STOP", "response": "Done."},
    )
    row = {"sweep_id": "s", "trial_id": "n/t/0", "attempt": 1, "agent_kind": "nexau", "input_tokens": 30,
           "output_tokens": 3, "cost_usd": 0.3}
    doc = trajectory(row, events, request_log([(10, 1, 0.1), (20, 2, 0.2)], refused=0))
    assert validate(doc) == []
    first, second = doc["steps"][1:]
    assert [c["function_name"] for c in first["tool_calls"]] == ["run_shell_command", "read_file"]
    results = {r["source_call_id"]: r["content"] for r in first["observation"]["results"]}
    assert results == {"nexau-1": "setup.py", "nexau-2": "from setuptools import setup"}  # matched by tool name
    assert (first["metrics"]["prompt_tokens"], second["metrics"]["prompt_tokens"]) == (10, 20)
    # The steps' metrics sum to the row's totals (the proxy's meter).
    assert sum(s["metrics"]["cost_usd"] for s in (first, second)) == pytest.approx(doc["final_metrics"]["total_cost_usd"])
    assert sum(s["metrics"]["completion_tokens"] for s in (first, second)) == doc["final_metrics"]["total_completion_tokens"]


def test_announced_commands_and_their_exits():
    found = announced(ANNOUNCING, "cmd-1")
    assert [(c["command"], c["exit_code"], c["output"]) for c in found] == [
        ("python3 -m venv /opt/envs/heuristic", 0, ""),
        ("/opt/envs/heuristic/bin/pip install nosuchpkg", 1, "ERROR: No matching distribution found for nosuchpkg"),
        ("/opt/envs/heuristic/bin/python -c 'import numpy'", None, "")]
    # One exec: its commands are read from the whole agent log, not from its kept output.
    one = [{"type": "command", "command": "python3 script.py", "exit_code": 0, "output": "[... cut ...]"}]
    events = [json.loads(x) for x in exec_transcript(one, ANNOUNCING.encode()).splitlines()]
    assert [e["command"] for e in events] == ["python3 script.py", *(c["command"] for c in found)]
    assert exec_transcript([], None) is None
