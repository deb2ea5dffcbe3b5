"""Resource limits of a Docker sandbox during the agent phase, and which one fired.

Memory and pids are enforced by the kernel (container options, `hardening.hardening_kwargs`);
the writable layer has no kernel quota on overlay2 without xfs project quotas, so `LimitWatch`
polls it. Every `interval_s` seconds the watch reads the container's pids count (its cgroup
file on the host, else the daemon's stats) and its writable-layer size (`Sandbox.size`:
SizeRw, else a walk of the overlay upper directory). It fires, stopping the container (SIGKILL
to its init, which ends every process in it; the node keeps its free space and its process
table), when:

- `disk_quota`: the writable layer holds more than `disk_quota_bytes`;
- `pids_limit`: the pids count is within 5% of the limit at two polls in a row (a fork bomb
  sits at the limit; a build that touches it briefly does not).

An OOM kill is the kernel's: `oom_kills` reads the memory cgroup's `oom_kill` counter (cgroup
v1 memory.oom_control, v2 memory.events), else the container's OOMKilled state (0 or 1).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from docker.errors import DockerException

#: Fraction of the node's memory shared among its sandboxes by default (the rest: the node's
#: own processes, Ray, the page cache the daemon needs).
NODE_MEMORY_SHARE = 0.8
DEFAULT_WATCH_INTERVAL_S = 3.0
_PIDS_NEAR = 0.95

_CGROUP_DIRS = ("/sys/fs/cgroup/{ctrl}/docker/{id}", "/sys/fs/cgroup/docker/{id}",
                "/sys/fs/cgroup/system.slice/docker-{id}.scope", "/sys/fs/cgroup/{ctrl}/system.slice/docker-{id}.scope")


def default_memory_bytes(cpus_per_trial: float, max_concurrent: int | None) -> int:
    """Memory per sandbox on this node: total RAM x NODE_MEMORY_SHARE / its sandbox slots.

    Slots are how many trials Ray can place on the node: floor(node CPUs / cpus_per_trial),
    at most `max_concurrent` (the sweep's, cluster-wide), at least 1. Bytes.
    """
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    slots = max(1, int((os.cpu_count() or 1) // cpus_per_trial))
    if max_concurrent is not None:
        slots = max(1, min(slots, max_concurrent))
    return int(total * NODE_MEMORY_SHARE / slots)


def limit_setting(category: str, config: Any) -> str:
    """The setting behind a fired limit, as the trials row's agent_limit says it (e.g. "pids_limit=4096")."""
    field = {"pids_limit": "pids_limit", "disk_quota": "disk_quota_bytes", "oom": "memory_bytes"}[category]
    return f"{field}={getattr(config, field)}"


def cgroup_file(container_id: str, ctrl: str, name: str) -> Path | None:
    """The host path of cgroup file `name` of controller `ctrl` for the container, or None."""
    for pattern in _CGROUP_DIRS:
        path = Path(pattern.format(ctrl=ctrl, id=container_id)) / name
        if path.is_file():
            return path
    return None


def _read_counter(path: Path | None, key: str | None = None) -> int | None:
    if path is None:
        return None
    try:
        text = path.read_text()
    except OSError:
        return None
    if key is None:
        first = text.strip()
        return int(first) if first.isdigit() else None
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == key and parts[1].isdigit():
            return int(parts[1])
    return None


def pids_current(client: Any, container_id: str) -> int | None:
    """Processes and threads now in the container (None: unknown)."""
    value = _read_counter(cgroup_file(container_id, "pids", "pids.current"))
    if value is not None:
        return value
    try:
        return client.api.stats(container_id, stream=False, one_shot=True).get("pids_stats", {}).get("current")
    except DockerException:
        return None


def oom_kills(client: Any, container_id: str) -> int | None:
    """Processes the kernel's OOM killer killed in the container so far (None: unknown)."""
    for name in ("memory.oom_control", "memory.events"):
        value = _read_counter(cgroup_file(container_id, "memory", name), "oom_kill")
        if value is not None:
            return value
    try:
        state = client.api.inspect_container(container_id)["State"]
    except (DockerException, KeyError):
        return None
    return 1 if state.get("OOMKilled") else 0


class NoWatch:
    """The watch of a sandbox without limits (the local provider): nothing fires, nothing known."""

    fired = detail = disk_peak_bytes = oom_kills = None

    def __enter__(self) -> "NoWatch":
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def verdict(self, exit_code: int | None, timed_out: bool) -> None:
        return None


def watch_limits(sandbox: Any, interval_s: float = DEFAULT_WATCH_INTERVAL_S) -> "LimitWatch | NoWatch":
    """A LimitWatch of a container sandbox (`capabilities.image`) with its config's disk quota,
    and its pids limit when the engine enforces limits (`capabilities.enforces_limits`; a
    rootless Podman engine on cgroup v1 does not, and has no pids count to read); NoWatch for
    the others. The disk quota is watched either way: the writable layer's size is the
    engine's answer, cgroups or not."""
    if not sandbox.capabilities.image:
        return NoWatch()
    pids = sandbox.config.pids_limit if sandbox.capabilities.enforces_limits else None
    return LimitWatch(sandbox, pids, sandbox.config.disk_quota_bytes, interval_s)


class LimitWatch:
    """Watches one Docker sandbox (`sandbox.id`, `sandbox.size()`, `sandbox.stop()`) while the
    agent runs. Use as a context manager around the agent phase; afterwards `fired` is
    "disk_quota", "pids_limit" or None, `detail` says what was seen, `disk_peak_bytes` the
    largest writable-layer size seen (None: never measured). Never raises from its thread."""

    def __init__(self, sandbox: Any, pids_limit: int | None, disk_quota_bytes: int | None,
                 interval_s: float = DEFAULT_WATCH_INTERVAL_S) -> None:
        self.sandbox, self.pids_limit, self.disk_quota_bytes = sandbox, pids_limit, disk_quota_bytes
        self.interval_s = interval_s
        self.fired: str | None = None
        self.detail: str | None = None
        self.disk_peak_bytes: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="reb-ray-limit-watch")
        self._near_pids = 0
        self.oom_kills: int | None = None

    def __enter__(self) -> "LimitWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                reason = self.check()
            except Exception:  # noqa: BLE001 - a watch failure must not end the trial
                continue
            if reason:
                self.fired, self.detail = reason
                self.sandbox.stop()
                return

    def verdict(self, exit_code: int | None, timed_out: bool) -> tuple[str, str] | None:
        """After the agent phase (the watch stopped): the category and limit that ended it, or
        None. Also reads `oom_kills`: an OOM kill ended the phase when the agent then failed
        (exit non-zero; exit 137 counts when the counter is unknown)."""
        if self.fired:
            return self.fired, self.detail or self.fired
        self.oom_kills = oom_kills(self.sandbox.client, self.sandbox.id)
        limit = f"memory_bytes={self.sandbox.config.memory_bytes}"
        if not timed_out and exit_code != 0 and (self.oom_kills or (self.oom_kills is None and exit_code == 137)):
            return "oom", f"{self.oom_kills or 'an'} OOM kill(s) at {limit}"
        return None

    def check(self) -> tuple[str, str] | None:
        """One poll: the limit that fired and what was seen, or None."""
        if self.disk_quota_bytes is not None:
            size = self.sandbox.size(timeout=self.interval_s).bytes
            if size is not None:
                self.disk_peak_bytes = max(size, self.disk_peak_bytes or 0)
                if size > self.disk_quota_bytes:
                    return "disk_quota", f"writable layer {size} bytes > disk_quota_bytes={self.disk_quota_bytes}"
        if self.pids_limit is not None:
            current = pids_current(self.sandbox.client, self.sandbox.id)
            self._near_pids = self._near_pids + 1 if current is not None and current >= self.pids_limit * _PIDS_NEAR else 0
            if self._near_pids >= 2:
                return "pids_limit", f"{current} processes at pids_limit={self.pids_limit}"
        return None
