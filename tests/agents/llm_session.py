"""A real LLM agent session for the runner tests: the scripted endpoint behind the metering
proxy (bound on the Docker bridge), a Docker sandbox opened the way trial.py opens one (its
config, the toolchain slot, the repository placed), the agent run with `ctx.llm`, and then the
real probe phase on what it left.

`trial.py` does not give `ctx.llm` yet (another branch wires the proxy into the trial), so
this drives the same steps itself; the sweep-level test comes with that wiring.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import shutil
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from reb_ray.agents import get_agent
from reb_ray.agents.base import REPORT_PATH, AgentContext, AgentRun, LlmAccess
from reb_ray.agents.prompt import render_prompt
from reb_ray.agents.toolchain import Toolchain
from reb_ray.agents.toolchain_mount import ToolchainSlot
from reb_ray.llm.proxy import ProxyServer
from reb_ray.llm.scripted import ScriptedEndpoint, script_from
from reb_ray.models.report import parse_report
from reb_ray.models.sweep import SweepConfig, TrialSpec
from reb_ray.suite.load import load_suite
from reb_ray.suite.placement import place_repo
from reb_ray.trial.probe_phase import run_probe_phase
from reb_ray.sandbox import open_sandbox
from reb_ray.trial.run import _sandbox_config
from reb_ray.trial.record import TrialRecorder

WHEELS = [Path("/opt/wheels")] if Path("/opt/wheels").is_dir() else []
REAL_KEY_ENV = "REB_RAY_TEST_LLM_KEY"
REAL_KEY = "sk-test-real-9a8b7c6d5e4f30211203f4e5d6c7b8a9"
VENV = "/opt/venv"
REPORT = {"python_path": f"{VENV}/bin/python", "python_version": "3.11.2", "torch_version": None,
          "cuda_available": None, "gpu_count": None, "ddp_expected_ok": None, "env_tool": "venv",
          "env_name": "venv", "notes": "numpy from requirements.txt"}
BUILD = f"python3 -m venv {VENV} && {VENV}/bin/pip install -q numpy && {VENV}/bin/python -c 'import numpy'"
WRITE_REPORT = f"mkdir -p /opt/scimlopsbench && printf '%s' '{json.dumps(REPORT)}' > {REPORT_PATH}"
#: What the agent's commands saw of their environment (searched for the real key afterwards).
ENV_DUMP = "/tmp/agent-env.txt"


def bridge_gateway(docker_client) -> str:
    """The host's address on Docker's default bridge (where sandboxes find node services)."""
    config = docker_client.networks.get("bridge").attrs["IPAM"]["Config"][0]
    return config.get("Gateway") or str(next(ipaddress.ip_network(config["Subnet"]).hosts()))


def build_script(model: str, *, write_report: bool = True, final: dict | None = None) -> dict:
    """Build a venv with numpy, (write the report,) end with a message; distinct usage numbers
    in every field of every turn so a dropped or swapped field shows."""
    second = f"{WRITE_REPORT} && env > {ENV_DUMP}" if write_report else f"env > {ENV_DUMP}"
    final = final or {"kind": "message", "text": f"The environment is ready: {VENV}/bin/python."}
    return {"model": model, "turns": [
        {"kind": "tool", "command": BUILD, "text": "Creating the venv.",
         "usage": {"input_tokens": 2300, "cached_input_tokens": 900, "cache_write_tokens": 400,
                   "output_tokens": 61, "reasoning_tokens": 17}},
        {"kind": "tool", "command": second,
         "usage": {"input_tokens": 3100, "cached_input_tokens": 2200, "cache_write_tokens": 300,
                   "output_tokens": 43, "reasoning_tokens": 9}},
        {**final, "usage": {"input_tokens": 3400, "cached_input_tokens": 3000, "cache_write_tokens": 0,
                            "output_tokens": 29, "reasoning_tokens": 0}},
    ]}


@dataclass
class Session:
    """What one session left: the agent's run, the proxy's meter, the endpoint's session (as
    the real key names it), files read from the sandbox before it closed, the probe rows."""

    run: AgentRun
    meter: dict
    endpoint: dict | None
    report: bytes | None
    env_seen: str | None
    key_hits: str
    row: dict = field(default_factory=dict)
    stages: list[dict] = field(default_factory=list)


def run_session(docker_client, image: str, kind: str, model: str, script: dict, *, timeout_s: float = 300,
                max_turns: int | None = None, probes: bool = True, extra_args: tuple[str, ...] = (),
                toolchain: Toolchain | None = None) -> Session:
    """One agent phase of `kind` on the demo task numpy-trainer against `script`, then (when
    `probes`) the probe phase. The real key is in the proxy's environment only, and also in
    `ctx.env` under the spec's key variable, where the trial puts driver credentials: the
    runner must keep it out of the sandbox. The caller sets REAL_KEY_ENV (fixture `real_key`)."""
    task = next(t for t in load_suite("demo") if t.id == "numpy-trainer")
    spec_table = {"kind": kind, "model": model, "max_turns": max_turns, "extra_args": list(extra_args)}
    config = SweepConfig(agent_specs={"llm": spec_table}, agents=["llm"], wheelhouses=WHEELS,
                         agent_timeout_s=timeout_s)
    spec = TrialSpec(sweep_id=f"test-{kind}-{uuid.uuid4().hex[:6]}", agent="llm", task=task, trial_index=0,
                     config=config, image=image)
    agent = get_agent(spec.agent_spec)
    assert agent.uses_llm and agent.uses_toolchain
    workspace = Path(tempfile.mkdtemp(prefix="reb-ray-test-llm-"))
    with contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, workspace, True)
        endpoint = stack.enter_context(ScriptedEndpoint(script_from(script)))
        proxy = stack.enter_context(ProxyServer(host=bridge_gateway(docker_client)))
        stand_in = proxy.register_trial(spec.trial_id, endpoint.url, REAL_KEY_ENV, model=model)
        slot = ToolchainSlot(toolchain or Toolchain.current()).open()
        stack.callback(slot.close)
        sandbox_config, pip_env = _sandbox_config(spec, [])
        sandbox_config.propagated_mounts.update(slot.mounts)
        sandbox = stack.enter_context(open_sandbox("docker", sandbox_config, trusted=agent.trusted))
        repo_dir = f"{sandbox.workdir}/repo"
        placed = place_repo(task, workspace)
        sandbox.put(placed.path, repo_dir)
        ctx = AgentContext(repo_dir, REPORT_PATH, timeout_s, {**pip_env, agent.spec.key_env: REAL_KEY},
                           prompt=render_prompt(task, REPORT_PATH, repo_dir), toolchain=slot.sandbox_path,
                           llm=LlmAccess(proxy.url, stand_in, model, max_turns))
        run = agent.run(sandbox, ctx)
        meter = proxy.meter(spec.trial_id)
        sandbox.kill_leftovers()
        report = _read(sandbox, REPORT_PATH)
        env_seen = _read(sandbox, ENV_DUMP)
        hits = sandbox.exec(["sh", "-c", f"grep -rlsF --exclude-dir=reb-ray-agent {REAL_KEY} /work /root /opt /tmp /etc /var || true"], timeout=120)
        session = Session(run, meter, endpoint.session(REAL_KEY), report,
                          env_seen.decode() if env_seen is not None else None, hits.output.strip())
        if probes:
            slot.detach()
            rec = TrialRecorder(spec)
            rec.row["repo_commit"] = placed.commit  # the witness lists this commit's blobs, as run_trial records it
            status, parsed, _ = parse_report(report)
            rec.row["report_status"] = status
            run_probe_phase(rec, sandbox, spec, repo_dir, parsed, [])
            session.row, session.stages = rec.row, rec.stages
    return session


def _read(sandbox, path: str) -> bytes | None:
    try:
        return sandbox.read_bytes(path)
    except FileNotFoundError:
        return None


def transcript_events(run: AgentRun) -> list[dict]:
    """The run's transcript as a list of events (every line must be a JSON object)."""
    assert run.transcript is not None
    return [json.loads(line) for line in run.transcript.decode().splitlines()]
