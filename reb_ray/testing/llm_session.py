"""One LLM agent's session in a real Docker sandbox, prepared by the trial's own `prepare`.

`LlmSession` starts the scripted endpoint and a metering proxy on Docker's default bridge (the
sandbox reaches it there), then prepares an attempt of the agent with `reb_ray.trial.prepare`
exactly as `run_trial` does (repository placed and copied in, toolchain slot, the sweep's
sandbox config with wheelhouse and pip settings, the LLM registration with a stand-in key,
the agent's context with its prompt and `ctx.llm`). The sweep sets `network = "bridge"`, the
explicit unguarded network, so no host guard is installed for a test. `run()` runs the
agent; `probe()` stops its leftovers, detaches the toolchain and runs the real probe phase
on the report it left, returning the trials row. Everything is closed on exit
(`Prepared.close`). `run_session` is one whole session of a CLI agent for the runner tests:
the agent phase, what it left in the sandbox, then the probes.

Used by the runner tests (tests/agents/) and the runner benchmark; shipped in the package so
that neither imports the other.
"""

from __future__ import annotations

import ipaddress
import json
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from reb_ray.agents.base import REPORT_PATH, AgentRun
from reb_ray.agents.toolchain import Toolchain, toolchain_key
from reb_ray.llm.meter import TrialLimits
from reb_ray.llm.proxy import ProxyServer
from reb_ray.llm.scripted import ScriptedEndpoint, script_from
from reb_ray.models.agent import KIND_DEFAULTS
from reb_ray.models.report import parse_report
from reb_ray.models.sweep import SweepConfig, TrialSpec
from reb_ray.suite.load import load_suite
from reb_ray.trial.llm import DRAIN_S, register_on, unregister_on
from reb_ray.trial.prepare import Prepared, prepare
from reb_ray.trial.probe_phase import run_probe_phase
from reb_ray.trial.record import TrialRecorder
from reb_ray.trial.result import flatten

WHEELS = [Path("/opt/wheels")] if Path("/opt/wheels").is_dir() else []
#: The variable the runner tests' "real" LLM key lives in (the `real_key` fixture sets it).
REAL_KEY_ENV = "REB_RAY_TEST_LLM_KEY"
REAL_KEY = "sk-REALKEY-9a8b7c6d5e4f30211203f4e5d6c7b8a9"
VENV = "/opt/venv"
REPORT = {"python_path": f"{VENV}/bin/python", "python_version": "3.11.2", "torch_version": None,
          "cuda_available": None, "gpu_count": None, "ddp_expected_ok": None, "env_tool": "venv",
          "env_name": "venv", "notes": "numpy from requirements.txt"}
BUILD = f"python3 -m venv {VENV} && {VENV}/bin/pip install -q numpy && {VENV}/bin/python -c 'import numpy'"
#: A first command for a session whose environment nothing probes (a test about the report, a
#: limit, the CLI's own behaviour): a tool call that runs, without the seconds of a pip install.
NO_BUILD = f"mkdir -p {VENV} && echo building"
WRITE_REPORT = f"mkdir -p /opt/scimlopsbench && printf '%s' '{json.dumps(REPORT)}' > {REPORT_PATH}"
#: What the agent's commands saw of their environment (searched for the real key afterwards).
ENV_DUMP = "/tmp/agent-env.txt"


def bridge_gateway(docker_client) -> str:
    """The host's address on Docker's default bridge (where sandboxes find node services)."""
    config = docker_client.networks.get("bridge").attrs["IPAM"]["Config"][0]
    return config.get("Gateway") or str(next(ipaddress.ip_network(config["Subnet"]).hosts()))


def demo_task(task_id: str = "numpy-trainer"):
    return next(t for t in load_suite("demo") if t.id == task_id)


class _SessionProxy:
    """The session's own ProxyServer as the trial's `ProxyClient` (in this process, like the
    trial's private proxy, but started by the session so that its meter can be read)."""

    def __init__(self, server: ProxyServer) -> None:
        self.server = server

    def register(self, trial_key: str, upstream: str, real_key_env: str | None, limits: TrialLimits,
                 model: str | None) -> tuple[str, str]:
        return register_on(self.server, trial_key, upstream, real_key_env, limits, model)

    def finish(self, trial_key: str) -> tuple[dict, list[dict]]:
        return unregister_on(self.server, trial_key)

    def meter(self, trial_key: str) -> dict:
        return self.server.meter(trial_key)


class LlmSession:
    """See the module docstring. `spec` is the agent's `[agents.NAME]` table (its `base_url` is
    the scripted endpoint, its `key_env` `real_key_env`); `script` the scripted endpoint's
    table; `real_key_env` the variable the proxy reads the real key from (None: no key, the
    stand-in is passed through); `toolchain` the agent toolchain (default: this node's), which
    must lie at its key under a toolchains directory (`Toolchain.current(directory)`)."""

    def __init__(self, docker_client, image: str, spec: dict, script: dict, *, timeout_s: float = 300.0,
                 task_id: str = "numpy-trainer", real_key_env: str | None = None, toolchain: Toolchain | None = None,
                 proxy_read_timeout_s: float = 600.0, sweep_prefix: str = "test") -> None:
        if toolchain is not None and toolchain.path.name != toolchain_key():
            raise ValueError(f"toolchain {toolchain.path}: a trial mounts the toolchain at its key "
                             f"{toolchain_key()!r} under a directory: use Toolchain.current(directory)")
        self.docker_client, self.image, self.timeout_s = docker_client, image, timeout_s
        self.spec_table, self.real_key_env = dict(spec), real_key_env
        self.toolchains_dir = toolchain.path.parent if toolchain is not None else None
        self.task = demo_task(task_id)
        self.sweep_id = f"{sweep_prefix}-{uuid.uuid4().hex[:8]}"
        self.endpoint = ScriptedEndpoint(script_from(script))
        self.proxy = ProxyServer(host=bridge_gateway(docker_client), read_timeout_s=proxy_read_timeout_s)
        self.prepared: Prepared | None = None

    def __enter__(self) -> "LlmSession":
        try:
            self.endpoint.start()
            self.proxy.start()
            table = {**self.spec_table, "base_url": self.endpoint.url, "key_env": self.real_key_env or ""}
            self.config = SweepConfig(agent_specs={"agent": table}, agents=["agent"], wheelhouses=WHEELS,
                                      agent_timeout_s=self.timeout_s, network="bridge",
                                      toolchains_dir=self.toolchains_dir)
            self.trial = TrialSpec(sweep_id=self.sweep_id, agent="agent", task=self.task, trial_index=0,
                                   config=self.config, image=self.image)
            self.rec = TrialRecorder(self.trial)
            self.prepared = p = Prepared.begin(self.trial)
            prepare(p, self.rec, [], _SessionProxy(self.proxy))
            assert p.sandbox is not None and p.agent is not None and p.ctx is not None and p.llm is not None
            assert p.llm.access is not None, f"agent kind {table.get('kind')!r} uses no LLM"
            self.agent, self.sandbox, self.ctx, self.repo_dir = p.agent, p.sandbox, p.ctx, p.repo_dir
            self.key, self.trial_key = p.llm.access.api_key, p.llm.key
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        if self.prepared is not None:
            self.prepared.close(self.rec)
        self.proxy.stop()
        self.endpoint.stop()

    def containers(self) -> list:
        """This session's containers still there (none after exit)."""
        return self.docker_client.containers.list(all=True, ignore_removed=True, filters={"label": f"reb-ray.sweep={self.sweep_id}"})

    def run(self) -> AgentRun:
        return self.agent.run(self.sandbox, self.ctx)

    def meter(self, drain_s: float = DRAIN_S) -> dict:
        """The trial's meter once its requests in flight have ended (at most `drain_s` seconds),
        as the trial reads it when the agent phase ends (`unregister_on`): a response the agent's
        exit cut off is counted a moment after the CLI returns."""
        deadline = time.monotonic() + drain_s
        while self.proxy.meter(self.trial_key)["in_flight"] > 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.proxy.meter(self.trial_key)

    def request_log(self) -> list[dict]:
        return self.proxy.request_log(self.trial_key)

    def endpoint_session(self) -> dict | None:
        """What the scripted endpoint saw of this trial (keyed by the key that reached it)."""
        return self.endpoint.session(os.environ[self.real_key_env] if self.real_key_env else self.key)

    def read(self, path: str) -> bytes | None:
        try:
            return self.sandbox.read_bytes(path)
        except FileNotFoundError:
            return None

    def report(self) -> bytes | None:
        return self.read(REPORT_PATH)

    def probe(self) -> dict:
        """The probes' verdict on what the agent left: stop its leftovers, detach the toolchain,
        run C0..C5 (and the env size) as the trial does, settle; the trials row (`rec.stages`
        holds the typed stage rows)."""
        status, report, _reason = parse_report(self.report())
        self.rec.result.between.report_status = status
        self.sandbox.kill_leftovers()
        assert self.prepared is not None
        self.prepared.slot.detach()
        run_probe_phase(self.rec, self.sandbox, self.trial, self.repo_dir, report, [])
        self.rec.settle()
        return dict(self.rec.row)


def build_script(model: str, *, write_report: bool = True, final: dict | None = None, build: str = BUILD) -> dict:
    """Build a venv with numpy (`build`: NO_BUILD when nothing probes the environment), (write the
    report,) end with a message; distinct usage numbers in every field of every turn so a dropped
    or swapped field shows."""
    second = f"{WRITE_REPORT} && env > {ENV_DUMP}" if write_report else f"env > {ENV_DUMP}"
    final = final or {"kind": "message", "text": f"The environment is ready: {VENV}/bin/python."}
    return {"model": model, "turns": [
        {"kind": "tool", "command": build, "text": "Creating the venv.",
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
    `ctx.env` under the spec's key variable and the kind's vendor variable, where a careless
    trial would put driver credentials: the runner must keep it out of the sandbox. The caller
    sets REAL_KEY_ENV to REAL_KEY (fixture `real_key`)."""
    spec_table = {"kind": kind, "model": model, "max_turns": max_turns, "extra_args": list(extra_args)}
    with LlmSession(docker_client, image, spec_table, script, timeout_s=timeout_s, real_key_env=REAL_KEY_ENV,
                    toolchain=toolchain, sweep_prefix=f"test-{kind}") as s:
        assert s.agent.uses_llm and s.agent.uses_toolchain
        vendor_key_env = KIND_DEFAULTS.get(kind, (None, None))[1]
        for name in {REAL_KEY_ENV, vendor_key_env} - {None}:
            s.ctx.env[name] = REAL_KEY
        run = s.run()
        meter = s.meter()
        s.sandbox.kill_leftovers()
        report = s.report()
        env_seen = s.read(ENV_DUMP)
        hits = s.sandbox.exec(["sh", "-c", f"grep -rlsF --exclude-dir=reb-ray-agent {REAL_KEY} /work /root /opt /tmp /etc /var || true"], timeout=120)
        session = Session(run, meter, s.endpoint.session(REAL_KEY), report,
                          env_seen.decode() if env_seen is not None else None, hits.output.strip())
        if probes:
            session.row = s.probe()
            session.stages = flatten(s.rec.result)[1]
    return session


def transcript_events(run: AgentRun) -> list[dict]:
    """The CLI's events in the run's transcript, in order (every line must be a JSON object);
    reb-ray's own annotation lines (`reb_ray.*` types: the arrival times the event reader
    appends, reb_ray.agents.cli_events) are left out."""
    assert run.transcript is not None
    events = [json.loads(line) for line in run.transcript.decode().splitlines()]
    return [e for e in events if not str(e.get("type", "")).startswith("reb_ray.")]
