"""The LLM runners' agent-phase overhead beyond the model session.

For each kind (codex, claude_code), N times (default 10), as a trial does it: a fresh Docker
sandbox with the toolchain slot and the demo repository numpy-trainer, then the agent run
against a one-turn scripted session (one message holding the report, so the report is
forced from the output: extraction included) through the metering proxy on the bridge. It
prints medians, in seconds, of:

- slot: toolchain mount (open) + unmount (detach) + release (close);
- agent: the runner's whole `run()` (what the trial's agent_wall_time_s holds);
- model: the session itself, the requests' durations at the proxy;
- overhead: agent - model (CLI start-up and shutdown, state directory, report extraction);
- and its parts: `--version`, the CLI exec, the clean-up exec (each exec's own duration), and
  copies (the rest: the state directory in, the forced report out).

Needs the toolchain (`reb-ray agents install`) and root (the slot mounts).
Usage: python benchmarks/agent_overhead.py [N] [KINDS=codex,claude_code]
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from reb_ray.agents import get_agent
from reb_ray.agents.base import REPORT_PATH, AgentContext, LlmAccess
from reb_ray.agents.prompt import REPORT_EXAMPLE, render_prompt
from reb_ray.agents.toolchain import Toolchain
from reb_ray.agents.toolchain_mount import ToolchainSlot
from reb_ray.llm.proxy import ProxyServer
from reb_ray.llm.scripted import ScriptedEndpoint, script_from
from reb_ray.models.sweep import SweepConfig, TrialSpec
from reb_ray.suite.load import load_suite
from reb_ray.suite.placement import place_repo
from reb_ray.sandbox import open_sandbox
from reb_ray.sandbox.docker.docker_client import connect
from reb_ray.sandbox.docker.image import build_image
from reb_ray.sandbox.tap import TappedSandbox
from reb_ray.trial.prepare import sandbox_config

MODELS = {"codex": "gpt-5.1-codex", "claude_code": "claude-sonnet-4-5"}
KEY_ENV = "REB_RAY_BENCH_LLM_KEY"


class TimedSandbox(TappedSandbox):
    """The sandbox with each exec's (first argument, duration_s) recorded."""

    def __init__(self, inner) -> None:
        super().__init__(inner, None)
        self.durations: list[tuple[str, float]] = []

    def exec(self, cmd, *args, **kwargs):
        result = super().exec(cmd, *args, **kwargs)
        self.durations.append((" ".join(cmd[:4]) if isinstance(cmd, list) else cmd, result.duration_s))
        return result


def gateway(client) -> str:
    config = client.networks.get("bridge").attrs["IPAM"]["Config"][0]
    return config.get("Gateway") or str(next(ipaddress.ip_network(config["Subnet"]).hosts()))


def one(kind: str, image: str, client, script, proxy: ProxyServer, i: int) -> dict:
    task = next(t for t in load_suite("demo") if t.id == "numpy-trainer")
    config = SweepConfig(agent_specs={"llm": {"kind": kind, "model": MODELS[kind]}}, agents=["llm"], wheelhouses=[])
    spec = TrialSpec(sweep_id=f"bench-{kind}", agent="llm", task=task, trial_index=i, config=config, image=image)
    agent = get_agent(spec.agent_spec)
    endpoint = ScriptedEndpoint(script).start()  # its sessions go by the real key: one endpoint per run
    stand_in = proxy.register_trial(spec.trial_id, endpoint.url, KEY_ENV, model=MODELS[kind])
    workspace = Path(tempfile.mkdtemp(prefix="reb-ray-bench-"))
    t = time.perf_counter()
    slot = ToolchainSlot(Toolchain.current()).open()
    slot_s = time.perf_counter() - t
    try:
        box_config, pip_env = sandbox_config(spec, [])
        box_config.propagated_mounts.update(slot.mounts)
        with open_sandbox("docker", box_config, trusted=False, allow_unsafe=False) as sandbox:
            repo_dir = f"{sandbox.workdir}/repo"
            sandbox.put(place_repo(task, workspace).path, repo_dir)
            ctx = AgentContext(repo_dir, REPORT_PATH, 300, pip_env, prompt=render_prompt(task, REPORT_PATH, repo_dir),
                               toolchain=slot.sandbox_path, llm=LlmAccess(proxy.url, stand_in, MODELS[kind]))
            timed = TimedSandbox(sandbox)
            run = agent.run(timed, ctx)
            assert run.exit_code == 0 and run.report_source == "forced_from_output", run.output[-2000:]
            t = time.perf_counter()
            slot.detach()
            slot_s += time.perf_counter() - t
    finally:
        t = time.perf_counter()
        slot.close()
        slot_s += time.perf_counter() - t
        shutil.rmtree(workspace, ignore_errors=True)
        endpoint.stop()
    model_s = sum(r["duration_s"] for r in proxy.request_log(spec.trial_id))
    proxy.unregister_trial(spec.trial_id)
    execs = [d for _, d in timed.durations]  # version, CLI, clean-up
    return {"slot": slot_s, "agent": run.wall_time_s, "model": model_s, "overhead": run.wall_time_s - model_s,
            "version": execs[0], "cli": execs[1], "cleanup": execs[2], "copies": run.wall_time_s - sum(execs)}


def main(n: int = 10, kinds: tuple[str, ...] = ("codex", "claude_code")) -> None:
    os.environ[KEY_ENV] = "sk-bench-not-a-real-key"
    client = connect()
    image = build_image(client, "minimal").tag
    text = f"Done.\n{json.dumps(REPORT_EXAMPLE)}"
    script = script_from({"model": "scripted", "turns": [
        {"kind": "message", "text": text, "usage": {"input_tokens": 1000, "output_tokens": 50}}]})
    with ProxyServer(host=gateway(client)) as proxy:
        for kind in kinds:
            one(kind, image, client, script, proxy, -1)  # warm-up: page cache, image layers
            rows = [one(kind, image, client, script, proxy, i) for i in range(n)]
            med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
            print(f"{kind}: median of {n} (s): " + ", ".join(f"{k} {v:.3f}" for k, v in med.items()))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10,
         tuple(sys.argv[2].split(",")) if len(sys.argv) > 2 else ("codex", "claude_code"))
