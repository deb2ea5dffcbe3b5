"""The `command` kind: a CLI agent from an argv template, in a real sweep (real Docker and Ray)."""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from pathlib import Path

import pytest

from reb_ray.agents.base import REPORT_PATH
from reb_ray.agents.command import last_json_object
from reb_ray.agents.prompt import render_prompt
from reb_ray.llm.scripted import ScriptedEndpoint, script_from
from reb_ray.models.sweep import SweepConfig
from reb_ray.suite.load import load_suite
from reb_ray.results.read import read_trials

WHEELS = [Path("/opt/wheels")] if Path("/opt/wheels").is_dir() else []
REPORT = {"python_path": "/opt/envs/cmd/bin/python", "python_version": None, "torch_version": None,
          "cuda_available": None, "gpu_count": None, "ddp_expected_ok": None, "env_tool": "venv",
          "env_name": "cmd", "notes": None}


def test_the_report_is_the_last_json_line_or_the_last_complete_object():
    assert last_json_object('progress {"step": 1}\n{"a": 1}\n{"python_path": "/p"}\ndone\n') == {"python_path": "/p"}
    pretty = 'log {"x": 1}\nfinal:\n{\n  "python_path": "/p",\n  "capabilities": {"cuda": false}\n}\nbye'
    assert last_json_object(pretty) == {"python_path": "/p", "capabilities": {"cuda": False}}
    assert last_json_object('["not", "an object"]\n{broken\n') is None
    assert last_json_object("") is None


# Both agents build a real venv with numpy and check it (the image's pip installs into it, without
# the seconds of ensurepip and byte-compiling: what is under test is the `command` kind, not how
# an agent builds); the first writes the report file, the second prints the report as its last
# line. Each records the prompt file's hash and its env.
# The first has an endpoint: it asks its model once, through the URL and key the trial gave it.
_ASK = r"""
import hashlib, json, os, urllib.request
key = os.environ["CMD_AGENT_KEY"]
body = json.dumps({"model": "gpt-5-mini", "messages": [{"role": "user", "content": "which venv?"}]}).encode()
req = urllib.request.Request(os.environ["AGENT_BASE"] + "/chat/completions", data=body,
                             headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
answer = json.load(urllib.request.urlopen(req, timeout=60))["choices"][0]["message"]["content"]
print("agent: model says", answer, "key sha", hashlib.sha256(key.encode()).hexdigest())
"""
_BUILD = r"""
set -e
echo "agent: prompt $(sha256sum "$1" | cut -d' ' -f1)"
echo "agent: cwd $(pwd) mode=$AGENT_MODE key=${CMD_AGENT_KEY:+set} base=${AGENT_BASE:-none}"
if [ -n "${AGENT_BASE:-}" ]; then python3 -c "$4"; fi
python3 -m venv --without-pip /opt/envs/cmd
python3 -m pip --python /opt/envs/cmd/bin/python install -q --no-compile numpy
/opt/envs/cmd/bin/python -c 'import numpy; print("agent: numpy", numpy.__version__)'
"""
_WRITE = 'mkdir -p "$(dirname "$2")" && printf "%s" "$3" > "$2"'
_PRINT = 'echo "agent: done, report follows"; printf "%s\\n" "$3"'


@pytest.mark.docker
def test_command_agents_in_a_real_sweep(tmp_path, monkeypatch, docker_client, sandbox_image, ray_local):
    from reb_ray.sweep.run import run_sweep

    real_key = f"sk-cmd-agent-{uuid.uuid4().hex}"
    monkeypatch.setenv("CMD_AGENT_KEY", real_key)
    report = json.dumps(REPORT)
    usage = {"input_tokens": 1200, "output_tokens": 30}
    endpoint = ScriptedEndpoint(script_from({"model": "gpt-5-mini", "turns": [
        {"kind": "message", "text": "use-a-venv", "usage": usage}]})).start()
    endpoint_url = endpoint.url
    specs = {
        "cmd-file": {"kind": "command", "command": ["sh", "-c", _BUILD + _WRITE, "agent", "{prompt_file}", "{report_path}",
                                                    report, _ASK],
                     "model": "gpt-5-mini", "base_url": endpoint_url + "/v1", "key_env": "CMD_AGENT_KEY",
                     "env": {"AGENT_MODE": "file", "AGENT_BASE": "{llm_base_url}"}},
        "cmd-output": {"kind": "command", "command": ["sh", "-c", _BUILD + _PRINT, "agent", "{prompt_file}", "{report_path}", report],
                       "report_mode": "output", "env": {"AGENT_MODE": "output"}},
    }
    config = SweepConfig(agent_specs=specs, agents=list(specs), tasks="numpy-trainer", sweep_id=f"test-{uuid.uuid4().hex[:8]}",
                         output=tmp_path / "runs", wheelhouses=WHEELS, max_concurrent=2)
    try:
        result = run_sweep(config, show_progress=False)
    finally:
        endpoint.stop()
    assert result.scored == 2
    rows = {r["agent"]: r for r in read_trials(config.output.dir).to_pylist()}
    task = next(t for t in load_suite("demo") if t.id == "numpy-trainer")
    expected_sha = render_prompt(task, REPORT_PATH).sha256
    for name, source in (("cmd-file", "agent_file"), ("cmd-output", "forced_from_output")):
        row = rows[name]
        assert row["status"] == "scored" and row["failure_owner"] is None, (name, row["failure_reason"], row["agent_output_tail"])
        assert row["c1_status"] == "success" and row["c0_missing"] == 0 and row["report_status"] == "ok"
        assert (row["agent_kind"], row["agent_model"], row["agent_version"]) == (
            "command", "gpt-5-mini" if name == "cmd-file" else None, None)
        assert row["report_source"] == source and row["prompt_sha256"] == expected_sha
        tail = row["agent_output_tail"]
        assert f"agent: prompt {expected_sha}" in tail  # the file the agent read is the prompt hashed in the row
        assert f"agent: cwd /work/repo mode={name.split('-')[1]}" in tail
    # The agent with an endpoint reached it through the node's proxy with a stand-in key: the
    # endpoint saw the real key (one request), the sandbox never did, and the row meters it.
    tail = rows["cmd-file"]["agent_output_tail"]
    assert "key=set" in tail and "agent: model says use-a-venv" in tail
    seen = re.search(r"key sha ([0-9a-f]{64})", tail).group(1)
    assert seen != hashlib.sha256(real_key.encode()).hexdigest(), "the sandbox was given the real key"
    assert re.search(r"base=http://[0-9.]+:\d+/v1", tail) and endpoint_url not in tail  # the proxy, not the endpoint
    assert (endpoint.session(real_key) or {}).get("position") == 1
    llm = rows["cmd-file"]
    assert (llm["llm_requests"], llm["input_tokens"], llm["output_tokens"]) == (1, 1200, 30)
    assert llm["cost_source"] == "price_table" and llm["cost_usd"] > 0
    plain = rows["cmd-output"]  # no endpoint: no key passed, and its spend is unknown
    assert "key=set" not in plain["agent_output_tail"] and "base=none" in plain["agent_output_tail"]
    assert plain["llm_requests"] is None and plain["cost_usd"] is None
    assert docker_client.containers.list(all=True, filters={"label": f"reb-ray.sweep={config.resume.sweep_id}"}) == []


@pytest.mark.docker
def test_output_mode_without_a_json_line_is_a_missing_report(tmp_path, sandbox_image):
    from reb_ray.models.sweep import TrialSpec
    from reb_ray.trial.run import run_trial

    spec = {"kind": "command", "command": ["sh", "-c", "echo 'no report here'; echo '{not json'"], "report_mode": "output"}
    config = SweepConfig(agent_specs={"quiet": spec}, agents=["quiet"], wheelhouses=[])
    task = next(t for t in load_suite("demo") if t.id == "numpy-trainer")
    row = run_trial(TrialSpec(sweep_id="test-cmd", agent="quiet", task=task, trial_index=0, config=config, image=sandbox_image)).trial
    assert (row["status"], row["report_status"], row["report_source"], row["failure_owner"]) == (
        "scored", "missing_report", "none", "agent")
    assert row["prompt_sha256"] == hashlib.sha256(render_prompt(task, REPORT_PATH).text.encode()).hexdigest()


def test_in_the_local_sandbox_the_host_toolchain_is_on_path(slow_process, tmp_path):
    from reb_ray.agents.toolchain import Toolchain
    from reb_ray.models.sweep import TrialSpec
    from reb_ray.trial.run import run_trial

    script = 'echo "agent: node at $(command -v node)"; mkdir -p "$(dirname "$1")"; printf "%s" "$2" > "$1"'
    report = dict(REPORT, python_path="/usr/bin/python3", env_tool="none")
    spec = {"kind": "command", "command": ["sh", "-c", script, "agent", "{report_path}", json.dumps(report)]}
    config = SweepConfig(agent_specs={"local": spec}, agents=["local"], sandbox="local", unsafe_local=True,
                         wheelhouses=[], toolchains_dir=tmp_path / "toolchains")
    task = next(t for t in load_suite("demo") if t.id == "numpy-trainer")
    row = run_trial(TrialSpec(sweep_id="test-cmd", agent="local", task=task, trial_index=0, config=config)).trial
    toolchain = Toolchain.current(tmp_path / "toolchains")
    assert f"agent: node at {toolchain.path}/bin/node" in row["agent_output_tail"], row["agent_output_tail"]
    assert (row["report_status"], row["report_source"]) == ("ok", "agent_file")
