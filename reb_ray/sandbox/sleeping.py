"""The sleeping sandbox provider (`sleep`): each phase takes its scripted seconds, no command runs.

For the scheduling benchmark (benchmarks/scheduling.py) and orchestrator tests at scale, where
a cluster is simulated on one machine without Docker. The trial path is the
real one (`run_trial`); only the work inside the sandbox is replaced by sleeps. Files are
real, in a temporary directory as with the local provider (put, get, report, size); an
absolute path outside it (a Docker-style /opt/...) lands inside it. Commands
are not run: the first exec of the agent phase sleeps the trial's `agent_s`, the first exec
after `kill_leftovers()` (the harness calls it between the phases) sleeps its `probe_s` (in a
GPU-sharing sweep, `config.shared_gpus`, `lease_gpus` sleeps it instead: the probe phase's work
happens once it holds its GPUs), and every exec then exits 0 with no output; an exec whose sleep would pass its timeout sleeps the
timeout and is timed out (exit 124). Archives are recorded, not unpacked (no command could
read them). Nothing runs, so any agent may use it.

The script is the JSON file named by the environment variable REB_RAY_SLEEP_SCRIPT (read once
per process: a slot worker runs many trials):

    {"trials": {"<trial_id>": {"agent_s": 12.5, "probe_s": 3.0}},
     "default": {"agent_s": 0, "probe_s": 0},
     "ledger": "/path/ledger.jsonl"}

`ledger` (optional): each sandbox appends one JSON line when closed: trial_id, attempt, gpus
(the physical ids it had last), pid, the wall-clock [start, end] (time.time()) of each phase's
sleep (`agent_sleep`, `probe_sleep`) and the GPU ids the sandbox had during it (`agent_gpus`,
`probe_gpus`), so a benchmark can measure GPU use from what really ran. Raises RebRayError when
the variable is unset or the file is unreadable.
"""

from __future__ import annotations

import json
import os
import threading
import time
from functools import lru_cache
from pathlib import Path
from typing import Mapping, Sequence

from reb_ray.errors import RebRayError
from reb_ray.sandbox.base import ExecResult, SandboxCapabilities, SandboxConfig
from reb_ray.sandbox.local import LocalSandbox
from reb_ray.sandbox.output import OutputSink

SCRIPT_ENV = "REB_RAY_SLEEP_SCRIPT"
_LEDGER_LOCK = threading.Lock()


@lru_cache(maxsize=4)
def load_script(path: str) -> dict:
    """The parsed script at `path`. Raises RebRayError naming the file."""
    try:
        script = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise RebRayError(f"sleep sandbox script {path}: {exc}") from None
    if not isinstance(script, dict):
        raise RebRayError(f"sleep sandbox script {path}: not a JSON object")
    return script


def scripted(trial_id: str) -> tuple[float, float, str | None]:
    """(agent seconds, probe seconds, ledger path or None) of `trial_id` in the script."""
    path = os.environ.get(SCRIPT_ENV)
    if not path:
        raise RebRayError(f"the sleep sandbox needs {SCRIPT_ENV} naming its script (see reb_ray.sandbox.sleeping)")
    script = load_script(path)
    entry = script.get("trials", {}).get(trial_id) or script.get("default") or {}
    return float(entry.get("agent_s", 0.0)), float(entry.get("probe_s", 0.0)), script.get("ledger")


class SleepingSandbox(LocalSandbox):
    """A temporary directory whose commands only take time; see the module docstring."""

    provider = "sleep"
    # The local sandbox's files (an absolute path lands inside its root, so a sandbox path is
    # not the host's), and no commands: the process and interpreter answers are never acted on,
    # and are the docker sandbox's, the provider whose trials it stands in for.
    capabilities = SandboxCapabilities(
        container_runtime=None, image=False, mounts=False, enforces_limits=False, own_network=False,
        fixed_paths=False, host_paths=False, commit=False, filesystem_diff=False, own_processes=True,
        own_interpreters=True,
    )

    def __init__(self, config: SandboxConfig) -> None:
        agent_s, probe_s, self._ledger = scripted(config.trial_id)
        self._seconds = {"agent": agent_s, "probe": probe_s}
        super().__init__(config, trusted=True)
        self._phase = "agent"
        self._slept: dict[str, list[float]] = {}
        self._gpus: dict[str, list[str]] = {}
        self.archives: list[tuple[str, str]] = []  # (host archive, sandbox directory) put so far

    def exec(self, cmd: str | Sequence[str], timeout: float | None = None, env: Mapping[str, str] | None = None,
             workdir: str | None = None, user: str | None = None, *, watch: Sequence[str] = (),
             sink: OutputSink | None = None) -> ExecResult:
        # No command runs, so any `user` is as good as another: it stands in for a container's exec.
        waiting = self._phase == "probe" and self.config.shared_gpus  # lease_gpus takes the probe's sleep
        seconds = 0.0 if self._phase in self._slept or waiting else self._seconds[self._phase]
        timed_out = timeout is not None and seconds > timeout
        seconds = min(seconds, timeout) if timeout is not None else seconds
        start = time.time()
        time.sleep(seconds)
        if not waiting:
            self._slept.setdefault(self._phase, [start, time.time()])
            self._gpus.setdefault(self._phase, list(self.config.gpus))
        return ExecResult(exit_code=124 if timed_out else 0, timed_out=timed_out, duration_s=time.time() - start,
                          pattern_matches={p: False for p in watch})

    def _path(self, path: str) -> Path:
        # Every path stays inside the sandbox's directory: "/opt/x" (a Docker-style path the
        # probes use) is root/opt/x, never the host's /opt.
        full = Path(path) if os.path.isabs(path) else Path(self.workdir) / path
        return full if full.is_relative_to(self.root) else self.root / full.relative_to("/")

    def lease_gpus(self, gpus: list[str]) -> None:
        """The probe phase now holds `gpus` (a GPU-sharing sweep): its scripted seconds pass now."""
        super().lease_gpus(gpus)
        if self._phase == "probe" and "probe" not in self._slept:
            self.exec("true")

    def put_tar(self, archive: Path, dest_dir: str) -> None:
        self.archives.append((str(archive), dest_dir))

    def kill_leftovers(self) -> list[str]:
        self._phase = "probe"
        return []

    def close(self) -> None:
        if self._closed:
            return
        super().close()
        if self._ledger:
            line = json.dumps({"trial_id": self.config.trial_id, "attempt": self.config.attempt, "gpus": self.config.gpus,
                               "pid": os.getpid(), **{f"{k}_sleep": v for k, v in self._slept.items()},
                               **{f"{k}_gpus": v for k, v in self._gpus.items()}})
            with _LEDGER_LOCK, open(self._ledger, "a") as f:
                f.write(line + "\n")
