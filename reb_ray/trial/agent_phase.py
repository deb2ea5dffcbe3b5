"""The agent phase of one trial attempt: the agent runs in the prepared sandbox, watched.

The agent runs under the sandbox's limit watch (pids, disk quota, memory: a limit that fires
stops the phase, and the probes are then not run) and the LLM key's watch (an LLM agent whose
key the endpoint refuses has its processes killed within seconds: `TrialLlm.watch_auth`).
Every exec of the agent streams into one full-log artifact, whatever the agent's code does.
The phase fills the attempt's `AgentPhaseResult` and `LlmUsage` and records its `agent` stage row, and returns an `AgentPhase`:
what ended it, when something other than the agent did.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from reb_ray.agents import Agent, AgentContext
from reb_ray.agents.base import AgentRun
from reb_ray.errors import RebRayError
from reb_ray.grading.startup import trajectory_hits
from reb_ray.llm.transcript import commands
from reb_ray.sandbox import ExecResult, Sandbox
from reb_ray.sandbox.limits import limit_setting, watch_limits
from reb_ray.sandbox.output import DEFAULT_HEAD_BYTES
from reb_ray.sandbox.tap import TappedSandbox
from reb_ray.trial.llm import TrialLlm
from reb_ray.trial.record import TrialRecorder


@dataclass(frozen=True)
class AgentPhase:
    """How the agent phase ended, where it was not the agent's own doing.

    `ended_by`: (category, reason) of a sandbox limit that stopped it (pids_limit, disk_quota,
    oom), the reason naming the limit's setting; None when none fired. `refused_key`: why the
    LLM endpoint refused the attempt's key when that ended it, else None.
    """

    ended_by: tuple[str, str] | None
    refused_key: str | None


def record_run(part, run: AgentRun) -> None:
    """What the agent said of its own run, into the trials row's agent part: its version, where
    its report came from, the limit that ended it and the tail of its output."""
    part.agent_version, part.report_source, part.agent_limit = run.agent_version, run.report_source, run.limit
    part.agent_output_tail = run.output[-DEFAULT_HEAD_BYTES:]


def run_agent_phase(rec: TrialRecorder, sandbox: Sandbox, agent: Agent, ctx: AgentContext,
                    llm: TrialLlm) -> AgentPhase:
    """Run the agent (module docstring) and record its result and its `agent` stage row.
    Raises RebRayError from the agent's run unless one of the watches ended it."""
    started = time.monotonic()
    with rec.full_log("agent") as log, watch_limits(sandbox) as watch, \
            llm.watch_auth(sandbox.kill_leftovers) as auth:
        tapped = TappedSandbox(sandbox, log)
        rec.agent_commands, rec.agent_prompt = tapped.commands, ctx.prompt  # for trajectory.json (atif_file)
        try:
            run = agent.run(tapped, ctx)
        except RebRayError:
            if watch.fired is None and auth.fired is None:
                raise
            run = AgentRun(exit_code=None, timed_out=False, wall_time_s=time.monotonic() - started, output="")
    ended_by = watch.verdict(run.exit_code, run.timed_out)
    if ended_by:
        run.limit = limit_setting(ended_by[0], sandbox.config)
        ended_by = (ended_by[0], f"{run.limit}: {ended_by[1]}")
    part = rec.result.agent
    part.sandbox_limit_fired = ended_by[0] if ended_by else None
    part.sandbox_oom_kills, part.sandbox_disk_peak_bytes = watch.oom_kills, watch.disk_peak_bytes
    # Tokens, cost and request log from the proxy; the transcript stored. A per-trial cost
    # limit that stopped the agent becomes run.limit (the agent's own limit).
    rec.result.llm.set(**llm.finish(run, rec.artifacts))
    # Shortcuts in the agent's own commands (its transcript, where it left one): kept for the
    # probe phase's start-up record (`grade_startup`).
    rec.trajectory_hits = trajectory_hits([c.command for c in commands(run.transcript)]) if run.transcript else []
    part.agent_exit_code, part.agent_timed_out, part.agent_wall_time_s = run.exit_code, run.timed_out, run.wall_time_s
    part.agent_log_path = log.path if log is not None and log.error is None else None
    record_run(part, run)
    result = ExecResult(exit_code=run.exit_code, timed_out=run.timed_out, duration_s=run.wall_time_s, output=run.output)
    status = "success" if run.exit_code == 0 and not run.timed_out else "failure"
    category = ended_by[0] if ended_by else "timeout" if run.timed_out else None
    rec.stage("agent", status, result=result, reason=run.limit, failure_category=category,
              log=log, total_bytes=max(tapped.total_bytes, len(run.output.encode())))
    return AgentPhase(ended_by, auth.fired)
