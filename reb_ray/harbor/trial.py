"""One attempt of a Harbor task in a reb-ray sandbox, the way Harbor runs it.

The phases, in order (each bounded by the task's own timeout):

1. **image**: the task's image, built once per node and digest (reb_ray.harbor.images); a
   failed build is the infrastructure's (`infra_sandbox`), with its log kept.
2. **sandbox**: a reb-ray Docker sandbox of that image with the task's cpus and memory
   (memory_mb), no network when the task says `no-network`, the GPUs the scheduler assigned,
   and the image's working directory (or the task's `workdir`). `/logs/agent`,
   `/logs/verifier` and `/logs/artifacts` are made, as Harbor mounts them.
3. **agent**: `oracle` copies solution/ to /solution and runs solve.sh (its output to
   /logs/agent/oracle.txt, solution.env set); `noop` does nothing (Harbor's `nop`); an
   `AgentRunner` (a callable: reb-ray's `command` agent in a sweep, reb_ray.harbor.sweep) runs
   whatever it runs through the sandbox it is given. A runner that needs more of the sandbox
   (an LLM CLI: its toolchain mounted, the network to the metering proxy) is also a
   `SandboxSetup`: it changes the sandbox's config before the sandbox starts and is told the
   started sandbox (reb_ray.harbor.llm_agent). The agent timeout is the task's
   `[agent] timeout_sec`. With `agent_log`, every exec of the phase is also written there and
   kept as a command record (`HarborOutcome.commands`, the steps of the ATIF trajectory).
4. **verifier**: stale reward files are removed, tests/ is copied to /tests only now (the agent
   never saw it), and `/tests/test.sh` runs with `[verifier] env`, its output to
   /logs/verifier/test-stdout.txt, within `[verifier] timeout_sec`.
5. **reward**: read from where Harbor's verifier reads it: /logs/verifier/reward.json (every
   numeric key kept) before reward.txt (one number, as `reward`). No reward file, or one that
   is not numbers, is the task's or the agent's failure (`reward_missing`, `reward_invalid`),
   never 0 by default: the attempt is scored with a null reward.

The verifier's directory is copied back into the attempt's log directory (`verifier/`, with
test-stdout.txt: the stage log), with the agent's log (`agent/`). The sandbox is removed on
every path.
"""

from __future__ import annotations

import json
import math
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, Union

from reb_ray.errors import InfraError, RebRayError
from reb_ray.harbor.images import ensure_image
from reb_ray.harbor.task import HarborTask

if TYPE_CHECKING:
    from reb_ray.sandbox import Sandbox, SandboxConfig

AGENTS = ("oracle", "noop")
#: runner(sandbox, task, timeout_s) -> (exit code, timed out): an agent phase of its own (module docstring).
AgentRunner = Callable[..., "tuple[int | None, bool]"]
LOGS = "/logs"
VERIFIER_DIR = f"{LOGS}/verifier"
class SandboxSetup(Protocol):
    """What a runner adds to the task's sandbox: `sandbox_config(config)` returns the config to
    start it with, `sandbox_opened(sandbox)` is called once it runs. Both raise InfraError."""

    def sandbox_config(self, config: SandboxConfig) -> SandboxConfig: ...

    def sandbox_opened(self, sandbox: Sandbox) -> None: ...


#: The agent's limit when the task sets none, seconds (reb-ray's default agent time limit).
DEFAULT_AGENT_TIMEOUT_S = 1800.0


@dataclass
class HarborOutcome:
    """One attempt's result: who owns a failure, the reward and every metric, the phase times (s)."""

    task_id: str
    agent: str
    status: str = "scored"            # scored | infra_error
    owner: str | None = None          # None when scored with a reward; agent | infra otherwise
    category: str | None = None
    reason: str | None = None
    reward: float | None = None
    rewards: dict[str, float] = field(default_factory=dict)
    agent_exit_code: int | None = None
    agent_timed_out: bool = False
    verifier_exit_code: int | None = None
    verifier_timed_out: bool = False
    image: str | None = None
    build_s: float | None = None
    agent_s: float | None = None
    verifier_s: float | None = None
    wall_s: float | None = None
    gpus: list[str] = field(default_factory=list)
    log_dir: str | None = None
    commands: list[dict] | None = None  # the agent phase's execs when an agent_log was given (None: no phase ran)

    def row(self) -> dict:
        """The attempt as a flat dict: one column per field, and `reward_<key>` per metric."""
        out = {k: v for k, v in self.__dict__.items() if k not in ("rewards", "commands")}
        out.update({f"reward_{key}": value for key, value in sorted(self.rewards.items())})
        return out


def parse_rewards(json_text: str | None, txt_text: str | None) -> tuple[dict[str, float] | None, str | None]:
    """({metric: value}, None) from reward.json (preferred, as Harbor reads it) or reward.txt
    ({"reward": value}); (None, category) when neither holds finite numbers: reward_missing when
    both are absent, reward_invalid otherwise."""
    if json_text is not None:
        try:
            data = json.loads(json_text)
        except ValueError:
            return None, "reward_invalid"
        values = data if isinstance(data, dict) else {"reward": data}
        if not values or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                                 for v in values.values()):
            return None, "reward_invalid"
        return {str(k): float(v) for k, v in values.items()}, None
    if txt_text is not None:
        try:
            value = float(txt_text.strip())
        except ValueError:
            return None, "reward_invalid"
        return ({"reward": value}, None) if math.isfinite(value) else (None, "reward_invalid")
    return None, "reward_missing"


def _image_workdir(tag: str) -> str:
    out = subprocess.run(["docker", "image", "inspect", "-f", "{{.Config.WorkingDir}}", tag],
                         capture_output=True, text=True)
    return out.stdout.strip() or "/"


def _read(sandbox, path: str, host_dir: Path) -> str | None:
    """The sandbox file `path` as text, or None when it is not there."""
    dest = host_dir / Path(path).name
    try:
        sandbox.get(path, dest)
    except (FileNotFoundError, RebRayError):
        return None
    target = dest / Path(path).name if dest.is_dir() else dest
    try:
        return target.read_text(errors="replace")
    except OSError:
        return None


def run_harbor_trial(task: HarborTask, agent: Union[str, AgentRunner], log_dir: Path, init_image: str,
                     image_map: dict[str, str] | None = None, gpus: list[str] | None = None, sweep_id: str = "harbor",
                     attempt: int = 1, *, trial_id: str | None = None, labels: dict[str, str] | None = None,
                     agent_log=None, agent_name: str | None = None, setup: SandboxSetup | None = None) -> HarborOutcome:
    """Run one attempt of `task` with `agent` (module docstring); always returns an outcome.
    `init_image`: the reb-ray sandbox image, whose init the task's image gets. `trial_id`,
    `labels`: the sandbox's ownership labels (a sweep's trial id and run token); `agent_log`: an
    output sink for the agent phase's execs; `agent_name`: the outcome's agent for a runner;
    `setup`: the runner's additions to the sandbox (SandboxSetup)."""
    from reb_ray.sandbox import SandboxConfig, open_sandbox
    from reb_ray.sandbox.tap import TappedSandbox

    if isinstance(agent, str) and agent not in AGENTS:
        raise ValueError(f"agent {agent!r}: a Harbor task runs here with {', '.join(AGENTS)}")
    started = time.monotonic()
    name = agent if isinstance(agent, str) else (agent_name or "runner")
    out = HarborOutcome(task.id, name, gpus=list(gpus or []), log_dir=str(log_dir))
    log_dir.mkdir(parents=True, exist_ok=True)
    sandbox = None
    try:
        t0 = time.monotonic()
        if task.docker_image is not None:
            out.image = task.docker_image
        else:
            out.image = ensure_image(task.id, task.environment_dir, task.dockerfile, image_map or {},
                                     log_dir.parent / "builds", task.build_timeout_s, init_image)
        out.build_s = time.monotonic() - t0
        config = SandboxConfig(image=out.image, workdir=task.workdir or _image_workdir(out.image),
                               cpus=task.cpus, memory_bytes=task.memory_mb * 2**20 if task.memory_mb else None,
                               network="bridge" if task.internet else "none", gpus=list(gpus or []),
                               sweep_id=sweep_id, trial_id=trial_id or f"{name}/{task.id}", attempt=attempt,
                               labels=dict(labels or {}))
        if setup is not None:
            config = setup.sandbox_config(config)
        try:
            sandbox = open_sandbox("docker", config)
        except RebRayError as exc:
            raise InfraError("infra_sandbox", f"cannot start the task's sandbox: {exc}") from None
        if setup is not None:
            setup.sandbox_opened(sandbox)
        sandbox.exec(["sh", "-c", f"mkdir -p {LOGS}/agent {VERIFIER_DIR} {LOGS}/artifacts"], timeout=60, user="root")
        timeout = task.agent_timeout_s or DEFAULT_AGENT_TIMEOUT_S
        t0 = time.monotonic()
        tapped = TappedSandbox(sandbox, agent_log) if agent_log is not None else None
        where = tapped if tapped is not None else sandbox
        if agent == "oracle":
            if task.solve is None:
                out.owner, out.category = "agent", "no_solution"
                out.reason = f"{task.solution_dir}/solve.sh: the task has no oracle solution"
                return out
            sandbox.put(task.solution_dir, "/solution")
            result = where.exec(["bash", "-c", f"chmod +x /solution/solve.sh; /solution/solve.sh 2>&1 | tee {LOGS}/agent/oracle.txt; "
                                 "exit ${PIPESTATUS[0]}"],
                                timeout=timeout, env={"DEBIAN_FRONTEND": "noninteractive", **task.solution_env},
                                user="root")
            out.agent_exit_code, out.agent_timed_out = result.exit_code, result.timed_out
        elif not isinstance(agent, str):
            out.agent_exit_code, out.agent_timed_out = agent(where, task, timeout)
        out.agent_s = time.monotonic() - t0
        out.commands = tapped.commands if tapped is not None else None
        t0 = time.monotonic()
        sandbox.exec(["sh", "-c", f"rm -f {VERIFIER_DIR}/reward.txt {VERIFIER_DIR}/reward.json"], timeout=60, user="root")
        sandbox.put(task.tests_dir, "/tests")
        result = sandbox.exec(["bash", "-c", f"chmod +x /tests/test.sh; /tests/test.sh > {VERIFIER_DIR}/test-stdout.txt 2>&1"],
                              timeout=task.verifier_timeout_s, env=task.verifier_env)
        out.verifier_exit_code, out.verifier_timed_out = result.exit_code, result.timed_out
        out.verifier_s = time.monotonic() - t0
        with tempfile.TemporaryDirectory() as tmp:
            rewards, problem = parse_rewards(_read(sandbox, f"{VERIFIER_DIR}/reward.json", Path(tmp)),
                                             _read(sandbox, f"{VERIFIER_DIR}/reward.txt", Path(tmp)))
        for name in ("verifier", "agent"):
            try:
                sandbox.get(f"{LOGS}/{name}", log_dir / name)
            except (FileNotFoundError, RebRayError):
                pass
        if rewards is None:
            out.owner, out.category = "agent", problem
            out.reason = ("the verifier timed out" if out.verifier_timed_out else
                          f"no usable reward file in {VERIFIER_DIR} ({problem})")
        else:
            out.rewards = rewards
            out.reward = rewards.get("reward", next(iter(rewards.values())))
    except InfraError as exc:
        out.status, out.owner, out.category, out.reason = "infra_error", "infra", exc.category, str(exc)
    except Exception as exc:  # a harness bug or a lost daemon: never the agent's score
        out.status, out.owner, out.category = "infra_error", "infra", "infra_harness"
        out.reason = f"{type(exc).__name__}: {str(exc)[:300]}"
    finally:
        if sandbox is not None:
            sandbox.close()
        out.wall_s = time.monotonic() - started
        (log_dir / "outcome.json").write_text(json.dumps(out.row(), indent=2) + "\n")
    return out

