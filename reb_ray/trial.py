"""The life of one trial attempt (ARCHITECTURE.md "Life of a trial"), with no Ray in sight.

`run_trial(spec, gpus)` places the repository, runs the agent phase, stops what the agent left
running, runs the hidden probes (the toolbox enters the sandbox only now), grades, and returns
one `trials` row plus its `stages` rows. It always returns: infrastructure failures become an
`infra_error` row (retried by the orchestrator), agent failures a `scored` row. The sandbox and
the host workspace are removed on every path.
"""

from __future__ import annotations

import datetime as dt
import shutil
import socket
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from reb_ray.agents import REPORT_PATH, AgentContext, get_agent
from reb_ray.errors import InfraError, RebRayError
from reb_ray.grading.command_stage import grade_command_stage
from reb_ray.models.report import Report, parse_report
from reb_ray.models.sweep import TrialSpec
from reb_ray.placement import place_repo
from reb_ray.sandbox import ExecResult, Sandbox, SandboxConfig, open_sandbox
from reb_ray.sandbox.output import DEFAULT_HEAD_BYTES

LOG_KEEP = 8 * 1024  # bytes of head and of tail kept per stage in the `stages` rows
WHEELHOUSE_MOUNT = "/opt/reb-ray/wheelhouse"
PIP_CACHE_MOUNT = "/root/.cache/pip"


@dataclass
class TrialOutcome:
    """The rows one attempt produced: `trial` for the trials dataset, `stages` for stages."""

    trial: dict
    stages: list[dict] = field(default_factory=list)

    @property
    def status(self) -> str:
        return self.trial["status"]


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


class _Recorder:
    """Collects the trial row and stage rows of one attempt."""

    def __init__(self, spec: TrialSpec) -> None:
        self.spec = spec
        self.row: dict = {
            "sweep_id": spec.sweep_id, "trial_id": spec.trial_id, "attempt": spec.attempt,
            "trial_index": spec.trial_index, "task_id": spec.task.id, "suite": spec.task.suite,
            "agent": spec.agent, "node": socket.gethostname(), "sandbox_provider": spec.config.sandbox,
            "c0_total": spec.task.c0_baseline_total, "started_at": _now(),
        }
        self.stages: list[dict] = []

    def stage(self, stage: str, status: str, *, result: ExecResult | None = None, reason: str | None = None,
              failure_category: str | None = None, command: str | None = None, raw: str | None = None,
              duration_s: float | None = None) -> None:
        output = result.output if result is not None else ""
        self.stages.append({
            "sweep_id": self.spec.sweep_id, "trial_id": self.spec.trial_id, "attempt": self.spec.attempt,
            "task_id": self.spec.task.id, "agent": self.spec.agent, "stage": stage, "status": status,
            "reason": reason, "failure_category": failure_category, "command": command, "raw": raw,
            "exit_code": result.exit_code if result else None, "timed_out": result.timed_out if result else None,
            "duration_s": result.duration_s if result and duration_s is None else duration_s,
            "log_head": output[:LOG_KEEP] if result else None,
            "log_tail": output[-LOG_KEEP:] if result and len(output) > LOG_KEEP else None,
            "started_at": _now(),
        })

    def not_run(self, stages: list[str], reason: str, failure_category: str | None = None) -> None:
        for name in stages:
            self.row[f"{name}_status"] = "not_run"
            self.stage(name, "not_run", reason=reason, failure_category=failure_category)


def _sandbox_config(spec: TrialSpec, gpus: list[str]) -> tuple[SandboxConfig, dict[str, str]]:
    """The sandbox config and the agent's pip environment (find-links and cache)."""
    cfg = spec.config
    docker = cfg.sandbox == "docker"
    mounts = {str(w): f"{WHEELHOUSE_MOUNT}/{i}" for i, w in enumerate(cfg.wheelhouses)} if docker else {}
    rw_mounts: dict[str, str] = {}
    pip_env: dict[str, str] = {}
    if cfg.wheelhouses:
        pip_env["PIP_FIND_LINKS"] = " ".join(mounts.values()) if docker else " ".join(str(w) for w in cfg.wheelhouses)
    if cfg.pip_cache:
        cfg.pip_cache_dir.mkdir(parents=True, exist_ok=True)
        if docker:
            rw_mounts[str(cfg.pip_cache_dir)] = PIP_CACHE_MOUNT
        pip_env["PIP_CACHE_DIR"] = PIP_CACHE_MOUNT if docker else str(cfg.pip_cache_dir)
    else:
        pip_env["PIP_NO_CACHE_DIR"] = "1"
    config = SandboxConfig(
        image=spec.image, gpus=gpus, cpus=cfg.cpus_per_trial if docker else None, memory_bytes=cfg.memory_bytes,
        network=cfg.network, ca_bundle=cfg.ca_bundle if docker else None, mounts=mounts, rw_mounts=rw_mounts,
        sweep_id=spec.sweep_id, trial_id=spec.trial_id, attempt=spec.attempt,
    )
    return config, pip_env


def _check_disk(spec: TrialSpec) -> None:
    """Field case F13: a full disk is an infrastructure failure, found before the trial starts."""
    path = Path(tempfile.gettempdir())
    free = shutil.disk_usage(path).free
    if free < spec.config.min_free_bytes:
        raise InfraError("infra_disk_full", f"{free / 1e9:.1f} GB free at {path}, need {spec.config.min_free_bytes / 1e9:.1f} GB")


def run_trial(spec: TrialSpec, gpus: list[str] | None = None) -> TrialOutcome:
    """Run one attempt. `gpus` are the physical GPU ids assigned to it (may be empty)."""
    rec = _Recorder(spec)
    t0 = time.monotonic()
    sandbox: Sandbox | None = None
    workspace = Path(tempfile.mkdtemp(prefix="reb-ray-trial-"))
    try:
        _check_disk(spec)
        placed = place_repo(spec.task, workspace, spec.config.repo_mirrors)
        rec.row["repo_commit"] = placed.commit
        agent = get_agent(spec.agent)
        config, pip_env = _sandbox_config(spec, gpus or [])
        sandbox = open_sandbox(spec.config.sandbox, config, trusted=agent.trusted, allow_unsafe=spec.config.unsafe_local)
        repo_dir = f"{sandbox.workdir}/repo"
        sandbox.put(placed.path, repo_dir)
        report_path = REPORT_PATH if sandbox.provider == "docker" else f"{sandbox.workdir}/../report/report.json"
        _agent_phase(rec, sandbox, agent, AgentContext(repo_dir, report_path, spec.config.agent_timeout_s, pip_env))
        report = _between_phases(rec, sandbox, report_path)
        probe_t0 = time.monotonic()
        _probe_phase(rec, sandbox, spec, repo_dir, report, gpus or [])
        rec.row["probe_wall_time_s"] = time.monotonic() - probe_t0
        _settle(rec)
    except InfraError as exc:
        _infra(rec, exc.category, str(exc))
    except RebRayError as exc:
        _infra(rec, "infra_sandbox", str(exc))
    except Exception as exc:  # a harness bug must not be scored against the agent
        _infra(rec, "infra_harness", f"{type(exc).__name__}: {exc}")
    finally:
        if sandbox is not None:
            try:
                sandbox.close()
            except Exception as exc:  # noqa: BLE001 - removal failure must not hide the result
                rec.row["failure_reason"] = (rec.row.get("failure_reason") or "") + f" [close failed: {exc}]"
        shutil.rmtree(workspace, ignore_errors=True)
    rec.row["trial_wall_time_s"] = time.monotonic() - t0
    rec.row["finished_at"] = _now()
    return TrialOutcome(rec.row, rec.stages)


def _infra(rec: _Recorder, category: str, message: str) -> None:
    rec.row.update(status="infra_error", failure_owner="infra", failure_reason=f"{category}: {message}"[:2000])


def _agent_phase(rec: _Recorder, sandbox: Sandbox, agent, ctx: AgentContext) -> None:
    run = agent.run(sandbox, ctx)
    rec.row.update(agent_exit_code=run.exit_code, agent_timed_out=run.timed_out, agent_wall_time_s=run.wall_time_s,
                   agent_output_tail=run.output[-DEFAULT_HEAD_BYTES:])
    result = ExecResult(exit_code=run.exit_code, timed_out=run.timed_out, duration_s=run.wall_time_s, output=run.output)
    status = "success" if run.exit_code == 0 and not run.timed_out else "failure"
    rec.stage("agent", status, result=result, reason=run.limit, failure_category="timeout" if run.timed_out else None)


def _between_phases(rec: _Recorder, sandbox: Sandbox, report_path: str) -> Report | None:
    """Copy the report out and stop everything the agent left running."""
    try:
        data: bytes | None = sandbox.read_bytes(report_path)
    except FileNotFoundError:
        data = None
    sandbox.kill_leftovers()
    status, report, reason = parse_report(data)
    rec.row.update(report_status=status, report_python_path=report.python_path if report else None)
    rec.stage("report", "success" if report else "failure", reason=reason, raw=data.decode(errors="replace")[:65536] if data else None)
    return report


def _probe_phase(rec: _Recorder, sandbox: Sandbox, spec: TrialSpec, repo_dir: str, report: Report | None, gpus: list[str]) -> None:
    from reb_ray.grading.c0 import grade_c0
    from reb_ray.probes.c0 import run_c0
    from reb_ray.probes.command import run_stage_command
    from reb_ray.probes.env_size import run_env_size
    from reb_ray.probes.toolbox import install_toolbox

    probes = ["c0", "c1", "env_size"]
    if report is None:
        rec.not_run(probes, rec.row["report_status"])
        return
    if not _healthy(sandbox):
        rec.not_run(probes, "sandbox does not run commands after the agent phase", "sandbox_broken_by_agent")
        return
    try:
        toolbox = install_toolbox(sandbox)
    except Exception as exc:  # noqa: BLE001
        raise InfraError("infra_toolbox", f"installing the probe toolbox failed: {exc}") from None

    # C0: static imports against the report's interpreter.
    t = time.monotonic()
    raw = run_c0(sandbox, toolbox, repo_dir, report.python_path)
    c0 = grade_c0(raw, spec.task.c0_baseline_total)
    rec.row.update({k: v for k, v in c0.items() if k not in ("reason", "failure_category")})
    import json

    rec.stage("c0", c0["c0_status"], reason=c0.get("reason"), failure_category=c0.get("failure_category"),
              raw=json.dumps(raw) if raw is not None else None, duration_s=time.monotonic() - t)

    # C1: the task's CPU command, GPUs hidden.
    cpu = spec.task.stages.cpu
    if not cpu.applicable:
        rec.row["c1_status"] = "skipped"
        rec.stage("c1", "skipped", reason=cpu.skip_reason)
    else:
        result = run_stage_command(sandbox, cpu, repo_dir, report.python_path, f"{toolbox}/bin", visible_gpus="")
        graded = grade_command_stage(cpu, result.exit_code, result.timed_out, result.output)
        rec.row.update(c1_status=graded["status"], c1_exit_code=result.exit_code, c1_failure_category=graded["failure_category"])
        rec.stage("c1", graded["status"], result=result, reason=graded["reason"], failure_category=graded["failure_category"],
                  command=cpu.command if isinstance(cpu.command, str) else " ".join(cpu.command))

    # Environment size under the report interpreter's sys.prefix.
    size = run_env_size(sandbox, toolbox, report.python_path)
    rec.row.update(env_size_status=size["status"], env_size_bytes=size["env_size_bytes"],
                   env_size_apparent_bytes=size["env_size_apparent_bytes"])
    rec.stage("env_size", size["status"], reason=size["reason"] or size["prefix"])


def _healthy(sandbox: Sandbox) -> bool:
    """Field case F15a: an agent that killed PID 1 or broke /bin/sh leaves nothing to probe."""
    try:
        return sandbox.exec("true", timeout=60).ok
    except RebRayError:
        return False


def _settle(rec: _Recorder) -> None:
    """Trial status and failure owner from the stage results."""
    infra = [s for s in rec.stages if (s["failure_category"] or "").startswith("infra_")]
    if infra:
        _infra(rec, infra[0]["failure_category"], f"{infra[0]['stage']}: {infra[0]['reason']}")
        return
    rec.row["status"] = "scored"
    # A stage the agent prevented from running (broken sandbox) counts against it like a failure.
    failed = rec.row.get("report_status") != "ok" or any(
        s["status"] == "failure" or (s["status"] == "not_run" and s["failure_category"])
        for s in rec.stages if s["stage"] != "agent"
    )
    rec.row["failure_owner"] = "agent" if failed else None
    if failed:
        first = next((s for s in rec.stages if s["status"] in ("failure", "not_run")), None)
        rec.row["failure_reason"] = f"{first['stage']}: {first['reason']}" if first else None
