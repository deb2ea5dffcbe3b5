"""Harbor tasks as the tasks of a reb-ray sweep: `reb-ray sweep --suite harbor:PATH`.

A suite named `harbor:PATH` is the Harbor task at PATH, or every Harbor task directly under it
(reb_ray.harbor.task). Each becomes a `TaskSpec` the sweep expands, identifies, places and
resumes as it does its own: its id the directory's name, its suite `harbor:PATH` as given, no
reb-ray stage applicable (a Harbor task is graded by its own verifier), and a `HarborRef`
holding its `[environment] gpus` (what the dispatcher places) and the digest of its files
(what the sweep's scoring identity keeps for it: a changed test or Dockerfile is drift).

A Harbor trial runs with `run_harbor_attempt` instead of reb-ray's phases, on the slot the
dispatcher gave it: `reb_ray.harbor.trial.run_harbor_trial` (the one implementation, shared
with `reb-ray tasks run-harbor`: the image built once per node and digest, the agent, tests/
copied in only after it, the reward read as Harbor reads it), recorded into reb-ray's rows:

- the trials row: identity and settlement as every row has them, `reward` and `rewards`
  (every numeric key of reward.json), `harbor_image`, `harbor_build_s`, the agent's exit, time
  and log; an agent that runs no model (`noop`, `reference`) has cost 0 (`cost_source`
  `no_model`), a `command` agent's cost is unknown (null), an LLM CLI's is the proxy's;
- the stage rows `agent` (its execs' output, the log) and `verifier` (test.sh's exit, time,
  its whole output as the stage log, the rewards as the raw record). The verifier stage
  passes when a usable reward was read, whatever its value: the reward is the score. No
  reward file, or one that is not finite numbers, fails it as the agent's
  (`reward_missing`, `reward_invalid`); a task asking for more GPUs than the trial holds is
  `insufficient_hardware` (the hardware's); a build or sandbox failure makes the attempt an
  `infra_error` (retried, never scored).

Agents, by kind: `reference` is Harbor's `oracle` (the task's own solution/solve.sh: reb-ray's
name for a task's known-good recipe), `noop` is Harbor's `nop`, and `command` runs its
command (an argv) in the task's sandbox with the instruction in `$REB_RAY_INSTRUCTION` (and at
/logs/agent/instruction.md), in the task's working directory, without reb-ray's report
contract. The LLM CLI kinds (LLM_KINDS) run their real CLI in the task's sandbox, metered by
the node's proxy (reb_ray.harbor.llm_agent); their rows carry tokens, cost and transcript as
a reb-ray trial's do. Other kinds are refused before the sweep starts (`check_agents`).
"""

from __future__ import annotations

import hashlib
import json
import tempfile
import time
from pathlib import Path

from reb_ray.errors import RebRayError
from reb_ray.harbor.task import HarborTask, HarborTaskError, find_harbor_tasks, load_harbor_task
from reb_ray.harbor.llm_agent import LLM_KINDS, LlmRunner
from reb_ray.harbor.trial import DEFAULT_AGENT_TIMEOUT_S, LOGS, HarborOutcome, run_harbor_trial
from reb_ray.models.sweep import HARBOR_PREFIX, SweepConfig, TrialSpec
from reb_ray.models.task import CudaCheckSpec, HarborRef, Stages, TaskSource, TaskSpec
from reb_ray.trial.record import TrialOutcome

#: reb-ray agent kinds that run a Harbor task, and what Harbor calls them (an LLM CLI: itself).
AGENT_KINDS = {"reference": "oracle", "noop": "noop", "command": "command", **{kind: kind for kind in LLM_KINDS}}
#: The stage log's head and tail kept in the stage row, bytes each (TrialRecorder's LOG_KEEP).
LOG_KEEP = 8 * 1024
INSTRUCTION_PATH = f"{LOGS}/agent/instruction.md"


def is_harbor_suite(suite: str) -> bool:
    """Whether the sweep's `suite` names Harbor tasks (`harbor:PATH`)."""
    return suite.startswith(HARBOR_PREFIX)


def files_digest(task_dir: Path) -> str:
    """The 16-hex sha256 of every file under `task_dir` (its path relative to the task and its
    bytes, in sorted order; hidden files skipped): any change to the task's instruction,
    environment, tests or solution is another digest."""
    digest = hashlib.sha256()
    for path in sorted(p for p in Path(task_dir).rglob("*") if p.is_file()):
        rel = path.relative_to(task_dir)
        if any(part.startswith(".") for part in rel.parts):
            continue
        name, data = rel.as_posix().encode(), path.read_bytes()
        digest.update(b"%d:%s%d:" % (len(name), name, len(data)))
        digest.update(data)
    return digest.hexdigest()[:16]


def as_task_spec(task: HarborTask, suite: str) -> TaskSpec:
    """`task` as a sweep's TaskSpec (module docstring)."""
    why = "a Harbor task: graded by its own tests/test.sh"
    return TaskSpec(id=task.id, suite=suite, category="harbor", source=TaskSource(bundled="."),
                    stages=Stages(cuda=CudaCheckSpec(applicable=False, skip_reason=why)), task_dir=task.task_dir,
                    harbor=HarborRef(gpus=task.gpus, digest=files_digest(task.task_dir)))


def harbor_specs(suite: str) -> list[TaskSpec]:
    """The tasks of the suite `harbor:PATH`, sorted by id. Raises HarborTaskError (one line
    naming the file and key) when PATH holds no Harbor task or one cannot be read."""
    path = suite[len(HARBOR_PREFIX):]
    if not path:
        raise HarborTaskError(f"--suite {suite}: name the Harbor task or directory of tasks after 'harbor:'")
    return sorted((as_task_spec(task, suite) for task in find_harbor_tasks(Path(path).expanduser())),
                  key=lambda t: t.id)


def check_agents(config: SweepConfig) -> None:
    """Refuse, in one line, an agent of a kind that cannot run a Harbor task (AGENT_KINDS)."""
    for name in config.agents:
        kind = config.agent_spec(name).kind
        if kind not in AGENT_KINDS:
            raise RebRayError(f"agent {name!r}: kind {kind} does not run Harbor tasks; valid kinds for "
                              f"--suite {HARBOR_PREFIX}...: {', '.join(AGENT_KINDS)}")


def _command_runner(spec: TrialSpec):
    """The `command` agent's phase in a Harbor sandbox: its command (an argv) in the task's working
    directory, the instruction in $REB_RAY_INSTRUCTION and at INSTRUCTION_PATH, the agent's
    `env` and credentials added, as the sandbox's default user."""
    agent = spec.agent_spec
    command = list(agent.command or [])

    def run(sandbox, task: HarborTask, timeout: float) -> tuple[int | None, bool]:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "instruction.md"
            path.write_text(task.prompt, encoding="utf-8")
            sandbox.put(path, INSTRUCTION_PATH)
        env = {**agent.env, **spec.credentials, "REB_RAY_INSTRUCTION": task.prompt}
        result = sandbox.exec(command, timeout=timeout, env=env)
        return result.exit_code, result.timed_out

    return run


def _text(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None


def run_harbor_attempt(spec: TrialSpec, gpus: list[str] | None = None, no_gpus_reason: str | None = None,
                       ship_artifacts: bool = False, llm_proxy=None) -> TrialOutcome:
    """Run one attempt of the Harbor task `spec.task` (module docstring) on this node with the
    physical GPU ids `gpus`; always returns its rows, as reb_ray.trial.run_trial does.
    `llm_proxy`: the node's metering proxy for an LLM agent (None: a private one here)."""
    from reb_ray.agents.prompt import Prompt
    from reb_ray.environment.fingerprint import fingerprint
    from reb_ray.redact import Redactor
    from reb_ray.sandbox.scratch import make_scratch
    from reb_ray.trial import artifacts, atif_file
    from reb_ray.trial.artifacts import TrialArtifacts
    from reb_ray.trial.record import TrialRecorder

    gpus = [] if no_gpus_reason else list(gpus or [])
    rec = TrialRecorder(spec)
    redactor = Redactor(spec.credentials.values())
    staging = make_scratch("reb-ray-artifacts-")
    rec.artifacts = TrialArtifacts(staging, spec.sweep_id, spec.trial_id, spec.attempt, redactor)
    rec.result.hardware.set(**fingerprint(spec.config.sandbox.provider))
    t0 = time.monotonic()
    llm: LlmRunner | None = None
    try:
        task = load_harbor_task(spec.task.task_dir)
        rec.agent_prompt = Prompt("", task.prompt)
        rec.result.identity.prompt_sha256 = rec.agent_prompt.sha256
        rec.result.probe.gpus_assigned = len(gpus)
        kind = spec.agent_spec.kind
        if task.gpus > len(gpus):
            why = no_gpus_reason or f"the trial holds {len(gpus)}"
            rec.stage("verifier", "not_run", reason=f"the task asks for {task.gpus} GPU(s); {why}",
                      failure_category="insufficient_hardware")
            rec.settle()
        else:
            agent = AGENT_KINDS.get(kind)
            if agent is None:
                raise HarborTaskError(f"agent kind {kind} does not run Harbor tasks")
            if kind in LLM_KINDS:
                runner = llm = LlmRunner(spec, task, llm_proxy, rec.artifacts)
            else:
                runner = _command_runner(spec) if agent == "command" else agent
            with tempfile.TemporaryDirectory(prefix="reb-ray-harbor-") as tmp, rec.full_log("agent") as log:
                labels = {"reb-ray.run": spec.run_id} if spec.run_id else {}
                out = run_harbor_trial(task, runner, Path(tmp) / "attempt", spec.image or "", gpus=gpus,
                                       image_map=spec.config.sandbox.image_map, sweep_id=spec.sweep_id,
                                       attempt=spec.attempt, trial_id=spec.trial_id,
                                       labels=labels, agent_log=log, agent_name=spec.agent, setup=llm)
                rec.agent_commands = out.commands
                if log is not None:
                    log.close()
                verdict = llm.verdict() if llm is not None and out.status == "scored" else None
                if verdict is not None:  # failed because of its LLM endpoint: retried, never scored
                    rec.infra(*verdict)
                else:
                    _record(rec, out, Path(tmp) / "attempt", log, task.agent_timeout_s or DEFAULT_AGENT_TIMEOUT_S)
                if llm is not None:
                    llm.record(rec)
    except HarborTaskError as exc:
        rec.infra("infra_harness", str(exc))
    except Exception as exc:  # a harness bug must not be scored against the agent
        rec.infra("infra_harness", f"{type(exc).__name__}: {exc}")
    finally:
        if llm is not None:
            llm.close(rec)
        rec.result.agent.set(**atif_file.write(rec, rec.agent_commands, redactor))
    rec.result.identity.trial_wall_time_s = time.monotonic() - t0
    outcome = rec.outcome(redactor)
    artifacts.deliver(outcome, staging, spec.config.output.dir.resolve(), ship_artifacts)
    return outcome


def _record(rec, out: HarborOutcome, log_dir: Path, agent_log, timeout_s: float) -> None:
    """The outcome of run_harbor_trial as the attempt's result and stage rows."""
    from reb_ray.agents import get_agent

    rec.result.harbor.set(harbor_image=out.image, harbor_build_s=out.build_s)
    if out.status != "scored":
        rec.infra(out.category or "infra_harness", out.reason or "the Harbor trial failed")
        return
    agent_ran = out.agent_s is not None or out.category == "no_solution"
    kept = agent_log is not None and agent_log.error is None
    rec.result.agent.set(agent_exit_code=out.agent_exit_code, agent_timed_out=out.agent_timed_out if agent_ran else None,
                         agent_wall_time_s=out.agent_s, agent_log_path=agent_log.path if kept else None)
    if not get_agent(rec.spec.agent_spec).uses_llm and rec.spec.agent_spec.kind != "command":
        rec.result.llm.set(llm_requests=0, cost_usd=0.0, cost_source="no_model")
    limit = f"agent_timeout_s={timeout_s:g}" if out.agent_timed_out else None
    if out.category == "no_solution":  # nothing to run: the verifier's stage names why
        rec.stage("agent", "not_run", reason=out.reason)
        rec.stage("verifier", "not_run", reason=out.reason, failure_category="no_solution")
        rec.settle()
        return
    row = rec.stage("agent", "success", reason=limit, duration_s=out.agent_s)
    row.set(exit_code=out.agent_exit_code, timed_out=out.agent_timed_out, log_path=agent_log.path if kept else None)
    text = _text(log_dir / "verifier" / "test-stdout.txt")
    log_path = rec.artifacts.write("verifier", text.encode(), ".log.gz") if text is not None and rec.artifacts else None
    reward_raw = _text(log_dir / "verifier" / "reward.json") or _text(log_dir / "verifier" / "reward.txt")
    status = "success" if out.category is None else "failure"
    row = rec.stage("verifier", status, reason=out.reason, failure_category=out.category, duration_s=out.verifier_s,
                    command="/tests/test.sh", raw=reward_raw)
    head, tail = (text[:LOG_KEEP], text[max(LOG_KEEP, len(text) - LOG_KEEP):] or None) if text else (None, None)
    row.set(exit_code=out.verifier_exit_code, timed_out=out.verifier_timed_out, log_path=log_path,
            log_head=head, log_tail=tail)
    if out.category is None:
        rec.result.harbor.set(reward=out.reward, rewards=json.dumps(out.rewards, sort_keys=True))
    rec.settle()


__all__ = ["AGENT_KINDS", "as_task_spec", "check_agents", "files_digest", "harbor_specs", "is_harbor_suite",
           "run_harbor_attempt"]
