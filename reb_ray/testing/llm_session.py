"""One LLM agent's session in a real Docker sandbox, set up the way reb_ray/trial/run.py does it.

`LlmSession` starts the scripted endpoint and a metering proxy on the Docker bridge (the
sandbox reaches it there), registers the trial, opens the toolchain slot and a sandbox of the
sweep's config (wheelhouse, pip cache, CA bundle: trial._sandbox_config), places the task's
repository, and builds `ctx` with the trial's prompt and `ctx.llm` as the trial gives it.
`run()` runs the agent; `probe()` detaches the toolchain and runs the real probes
(run_probe_phase) on the report the agent left, returning the trials row. Everything is
removed on exit. Used by the runner tests and benchmarks/llm_runners.py.
"""

from __future__ import annotations

import ipaddress
import shutil
import tempfile
import uuid
from pathlib import Path

from reb_ray.agents import REPORT_PATH, get_agent
from reb_ray.agents.base import AgentContext, AgentRun, LlmAccess
from reb_ray.agents.prompt import render_prompt
from reb_ray.agents.toolchain import Toolchain
from reb_ray.agents.toolchain_mount import ToolchainSlot
from reb_ray.llm.meter import TrialLimits
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
TRIAL = "t1"


def bridge_gateway(docker_client) -> str:
    """The host's address on Docker's default bridge (where sandboxes find node services)."""
    config = docker_client.networks.get("bridge").attrs["IPAM"]["Config"][0]
    return config.get("Gateway") or str(next(ipaddress.ip_network(config["Subnet"]).hosts()))


def demo_task(task_id: str = "numpy-trainer"):
    return next(t for t in load_suite("demo") if t.id == task_id)


class LlmSession:
    """See the module docstring. `spec` is the agent's `[agents.NAME]` table; `script` the
    scripted endpoint's table; `real_key_env` the variable the proxy reads the real key from
    (None: the stand-in is passed through)."""

    def __init__(self, docker_client, image: str, spec: dict, script: dict, *, timeout_s: float = 300.0,
                 task_id: str = "numpy-trainer", real_key_env: str | None = None, toolchain: Toolchain | None = None,
                 proxy_read_timeout_s: float = 600.0) -> None:
        self.docker_client, self.image, self.timeout_s = docker_client, image, timeout_s
        self.task = demo_task(task_id)
        self.config = SweepConfig(agent_specs={"agent": spec}, agents=["agent"], wheelhouses=WHEELS,
                                  agent_timeout_s=timeout_s)
        self.trial = TrialSpec(sweep_id=f"test-{uuid.uuid4().hex[:8]}", agent="agent", task=self.task, trial_index=0,
                               config=self.config, image=image)
        self.agent = get_agent(self.trial.agent_spec)
        self.endpoint = ScriptedEndpoint(script_from(script))
        self.proxy = ProxyServer(host=bridge_gateway(docker_client), read_timeout_s=proxy_read_timeout_s)
        self.real_key_env = real_key_env
        self.toolchain = toolchain or Toolchain.current()
        self.slot = self.sandbox = None
        self.workspace = Path(tempfile.mkdtemp(prefix="reb-ray-llm-session-"))

    def __enter__(self) -> "LlmSession":
        try:
            self.endpoint.start()
            self.proxy.start()
            spec = self.trial.agent_spec
            self.key = self.proxy.register_trial(TRIAL, self.endpoint.url, self.real_key_env,
                                                 TrialLimits(max_cost_usd=spec.max_cost_usd), model=spec.model)
            self.slot = ToolchainSlot(self.toolchain).open()
            config, pip_env = _sandbox_config(self.trial, [])
            config.propagated_mounts.update(self.slot.mounts)
            self.sandbox = open_sandbox("docker", config, trusted=False)
            self.repo_dir = f"{self.sandbox.workdir}/repo"
            placed = place_repo(self.task, self.workspace)
            self.commit = placed.commit  # the probe phase's witness lists this commit's blobs
            self.sandbox.put(placed.path, self.repo_dir)
            self.ctx = AgentContext(self.repo_dir, REPORT_PATH, self.timeout_s, dict(pip_env),
                                    prompt=render_prompt(self.task, REPORT_PATH, self.repo_dir),
                                    toolchain=self.slot.sandbox_path,
                                    llm=LlmAccess(self.proxy.url, self.key, spec.model, spec.max_turns))
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        if self.sandbox is not None:
            self.sandbox.close()
        if self.slot is not None:
            self.slot.close()
        self.proxy.stop()
        self.endpoint.stop()
        shutil.rmtree(self.workspace, ignore_errors=True)

    def containers(self) -> list:
        """This session's containers still there (none after exit)."""
        return self.docker_client.containers.list(all=True, filters={"label": f"reb-ray.sweep={self.trial.sweep_id}"})

    def run(self) -> AgentRun:
        return self.agent.run(self.sandbox, self.ctx)

    def meter(self) -> dict:
        return self.proxy.meter(TRIAL)

    def endpoint_session(self) -> dict | None:
        """What the scripted endpoint saw of this trial (keyed by the key that reached it)."""
        import os

        return self.endpoint.session(os.environ[self.real_key_env] if self.real_key_env else self.key)

    def report(self) -> bytes | None:
        try:
            return self.sandbox.read_bytes(REPORT_PATH)
        except FileNotFoundError:
            return None

    def probe(self) -> dict:
        """The probes' verdict on what the agent left: detach the toolchain, run C0..C5 (and
        the env size) as the trial does; the trials row."""
        rec = TrialRecorder(self.trial)
        rec.row["repo_commit"] = self.commit
        _status, report, _reason = parse_report(self.report())
        self.sandbox.kill_leftovers()
        self.slot.detach()
        run_probe_phase(rec, self.sandbox, self.trial, self.repo_dir, report, [])
        rec.settle()
        return rec.row
