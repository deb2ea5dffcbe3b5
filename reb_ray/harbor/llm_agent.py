"""An LLM CLI agent (`claude_code`, `codex`, `mini_swe_agent`) in a Harbor task's sandbox, metered.

`LlmRunner` is the agent phase `run_harbor_trial` runs for such an agent (an `AgentRunner` and
a `SandboxSetup`), wired from the same parts a reb-ray trial's `prepare` uses:

- **toolchain**: the node's agent toolchain in a per-attempt slot (`toolchain_slot`), mounted
  into the sandbox (`propagated_mounts`) and unmounted as soon as the agent phase ends, so the
  verifier never sees it;
- **network**: the sandbox joins reb-ray's internal network `reb-ray-registries` behind the
  host guard (`TrialEgress`; `sandbox_network` puts a Harbor suite's LLM proxy on its
  gateway). A task without internet gets no egress proxy: the node's proxies' ports on the
  gateway are all it reaches, as under `registries` with nothing allowed. A task with
  internet gets the attempt's egress proxy: the sweep's `network_allow` hosts (the package
  registries by default), not the whole internet;
- **LLM**: the attempt registered with the node's metering proxy (`TrialLlm`) once the
  sandbox runs; the CLI gets the proxy's address and a stand-in key, never the real key (the
  sweep's credentials enter without it); `finish` gives the row's tokens, cost, request log
  and transcript;
- **context**: the prompt is the task's instruction.md as it is (no reb-ray system prompt),
  the working directory is the task's (its `workdir`, else the image's WORKDIR), the limit
  is the task's agent timeout, and the report path is REPORT_PATH, a file under Harbor's
  agent log directory that nothing grades (the CLIs may force a report from their last
  message; the verifier never reads it).

`close(rec)` is called on every path: the LLM registration closed (its tokens kept when the
agent phase never finished), the toolchain slot released, the egress proxy stopped, their
columns recorded. `verdict()` says when the attempt failed because of the LLM endpoint
(`llm_verdict`, a non-zero exit taking the place of a missing report; or the key refused).
"""

from __future__ import annotations

from reb_ray.agents import AgentContext, get_agent
from reb_ray.agents.base import AgentRun
from reb_ray.agents.prompt import Prompt
from reb_ray.agents.toolchain_mount import NoSlot, ToolchainSlot, toolchain_slot
from reb_ray.harbor.task import HarborTask
from reb_ray.harbor.trial import LOGS
from reb_ray.models.sweep import TrialSpec
from reb_ray.trial.agent_phase import record_run
from reb_ray.trial.egress import TrialEgress
from reb_ray.trial.llm import ProxyClient, TrialLlm, llm_verdict

#: The kinds whose agent is an LLM CLI run through the metering proxy.
LLM_KINDS = ("claude_code", "codex", "mini_swe_agent")
#: Where the CLI may write a report: Harbor's agent log directory, which no verifier grades.
REPORT_PATH = f"{LOGS}/agent/reb-ray-report.json"


class LlmRunner:
    """One attempt's LLM CLI agent phase in a Harbor sandbox (module docstring). `proxy` is the
    node's metering proxy (None: a private one in this process); `artifacts` the attempt's
    (where the transcript and request log go)."""

    def __init__(self, spec: TrialSpec, task: HarborTask, proxy: ProxyClient | None, artifacts) -> None:
        self.spec, self.task, self.proxy, self.artifacts = spec, task, proxy, artifacts
        self.agent = get_agent(spec.agent_spec)
        self.slot: NoSlot | ToolchainSlot = NoSlot()
        self.egress = TrialEgress(spec.config, proxied=task.internet)
        self.llm: TrialLlm | None = None
        self.sandbox = None
        self.run: AgentRun | None = None
        self.refused_key: str | None = None
        self.columns: dict = {}

    def sandbox_config(self, config):
        """The toolchain slot opened and mounted, the network decided (TrialEgress)."""
        cfg = self.spec.config.sandbox
        self.slot = toolchain_slot(self.agent.uses_toolchain, cfg.provider, cfg.toolchains_dir).open()
        config.propagated_mounts.update(self.slot.mounts)
        return self.egress.open(config)

    def sandbox_opened(self, sandbox) -> None:
        """The egress proxy serving this sandbox only; the attempt registered with the LLM proxy."""
        self.sandbox = sandbox
        self.egress.attach(sandbox)
        self.llm = TrialLlm(self.agent, self.spec, self.proxy, sandbox.provider).open()
        self.egress.allow_llm(self.llm.access)

    def context(self, timeout: float) -> AgentContext:
        assert self.llm is not None and self.sandbox is not None
        return AgentContext(self.sandbox.workdir, REPORT_PATH, timeout, self.llm.sandbox_credentials(),
                            prompt=Prompt("", self.task.prompt), toolchain=self.slot.sandbox_path,
                            llm=self.llm.access, task=self.spec.task)

    def __call__(self, sandbox, task: HarborTask, timeout: float) -> tuple[int | None, bool]:
        """Run the CLI (through `sandbox`, the tapped view), watched for a refused key; the
        meter read and the transcript stored; the toolchain unmounted before the verifier."""
        assert self.llm is not None and self.sandbox is not None
        try:
            with self.llm.watch_auth(self.sandbox.kill_leftovers) as auth:
                self.run = self.agent.run(sandbox, self.context(timeout))
            self.refused_key = auth.fired
            self.columns = self.llm.finish(self.run, self.artifacts)
        finally:
            self.slot.detach()
        return self.run.exit_code, self.run.timed_out

    def verdict(self) -> tuple[str, str] | None:
        """(infra category, reason) when the LLM endpoint failed the attempt, else None."""
        if self.refused_key:
            return "infra_llm_auth", (f"the LLM endpoint refused the trial's key ({self.refused_key}); "
                                      "the agent phase was ended")
        if self.run is None or self.llm is None or self.llm.log is None:
            return None
        return llm_verdict(self.llm.log, self.run.exit_code == 0 and not self.run.timed_out)

    def record(self, rec) -> None:
        """The run's columns: LLM usage and trajectory, the CLI's version, output tail, limit."""
        rec.result.llm.set(**self.columns)
        if self.run is not None:
            record_run(rec.result.agent, self.run)

    def close(self, rec) -> None:
        """Release every part, on every path; never raises (module docstring)."""
        if self.llm is not None:
            rec.result.llm.set(**self.llm.close(rec.artifacts))
        self.slot.close()
        rec.result.network.set(**self.egress.close(rec.artifacts))


__all__ = ["LLM_KINDS", "REPORT_PATH", "LlmRunner"]
