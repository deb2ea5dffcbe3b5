"""The `command` kind: a CLI agent from an argv template, in a real sweep (real Docker and Ray)."""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path

import pytest

from reb_ray.agents.base import REPORT_PATH
from reb_ray.agents.command import last_json_object
from reb_ray.agents.prompt import render_prompt
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


# Both agents build a real venv with numpy and check it; the first writes the report file, the
# second prints the report as its last line. Each records the prompt file's hash and its env.
_BUILD = r"""
set -e
echo "agent: prompt $(sha256sum "$1" | cut -d' ' -f1)"
echo "agent: cwd $(pwd) mode=$AGENT_MODE key=${CMD_AGENT_KEY:+set}"
python3 -m venv /opt/envs/cmd
/opt/envs/cmd/bin/pip install -q numpy
/opt/envs/cmd/bin/python -c 'import numpy; print("agent: numpy", numpy.__version__)'
"""
_WRITE = 'mkdir -p "$(dirname "$2")" && printf "%s" "$3" > "$2"'
_PRINT = 'echo "agent: done, report follows"; printf "%s\\n" "$3"'


@pytest.mark.docker
def test_command_agents_in_a_real_sweep(tmp_path, monkeypatch, docker_client, sandbox_image, ray_local):
    from reb_ray.sweep.run import run_sweep

    monkeypatch.setenv("CMD_AGENT_KEY", "sk-cmd-agent-5678")
    report = json.dumps(REPORT)
    specs = {
        "cmd-file": {"kind": "command", "command": ["sh", "-c", _BUILD + _WRITE, "agent", "{prompt_file}", "{report_path}", report],
                     "key_env": "CMD_AGENT_KEY", "env": {"AGENT_MODE": "file"}},
        "cmd-output": {"kind": "command", "command": ["sh", "-c", _BUILD + _PRINT, "agent", "{prompt_file}", "{report_path}", report],
                       "report_mode": "output", "env": {"AGENT_MODE": "output"}},
    }
    config = SweepConfig(agent_specs=specs, agents=list(specs), tasks="numpy-trainer", sweep_id=f"test-{uuid.uuid4().hex[:8]}",
                         output=tmp_path / "runs", wheelhouses=WHEELS, max_concurrent=2)
    result = run_sweep(config, show_progress=False)
    assert result.scored == 2
    rows = {r["agent"]: r for r in read_trials(config.output.dir).to_pylist()}
    task = next(t for t in load_suite("demo") if t.id == "numpy-trainer")
    expected_sha = render_prompt(task, REPORT_PATH).sha256
    for name, source in (("cmd-file", "agent_file"), ("cmd-output", "forced_from_output")):
        row = rows[name]
        assert row["status"] == "scored" and row["failure_owner"] is None, (name, row["failure_reason"], row["agent_output_tail"])
        assert row["c1_status"] == "success" and row["c0_missing"] == 0 and row["report_status"] == "ok"
        assert (row["agent_kind"], row["agent_model"], row["agent_version"]) == ("command", None, None)
        assert row["report_source"] == source and row["prompt_sha256"] == expected_sha
        tail = row["agent_output_tail"]
        assert f"agent: prompt {expected_sha}" in tail  # the file the agent read is the prompt hashed in the row
        assert f"agent: cwd /work/repo mode={name.split('-')[1]}" in tail
    assert "key=set" in rows["cmd-file"]["agent_output_tail"]  # its key variable, from the driver's environment
    assert "key=set" not in rows["cmd-output"]["agent_output_tail"]  # no key_env: nothing passed
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
