"""Labels that mark our containers and name the process that owns each one.

Every container reb-ray creates carries `reb-ray.managed=true`, the sweep, trial and attempt,
the run of the sweep that made it (`reb-ray.run`: a token the driver draws each time it starts,
since two sweeps of one configuration writing to two output directories share their sweep id,
trial ids and attempt numbers), and its owner: host name, pid and the pid's start time (clock ticks since boot, field 22 of
/proc/PID/stat), so a recycled pid is never mistaken for a live owner. The reaper removes only
containers with our label whose owner on this host is gone.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

MANAGED = "reb-ray.managed"
SWEEP = "reb-ray.sweep"
TRIAL = "reb-ray.trial"
ATTEMPT = "reb-ray.attempt"
#: The driver's token for one run of a sweep (`TrialSpec.run_id`); absent on containers made
#: outside a sweep (a single trial, the node checks).
RUN = "reb-ray.run"
OWNER_HOST = "reb-ray.owner.host"
OWNER_PID = "reb-ray.owner.pid"
OWNER_START = "reb-ray.owner.start"
#: On the per-attempt image a GPU-sharing trial commits between its phases (reb_ray.trial.phase_split);
#: it also carries the labels above, taken from the container it was committed from.
ATTEMPT_IMAGE = "reb-ray.attempt-image"
#: On an attempt's kept environment (reb_ray.environment.keep): never reaped, whatever its owner.
KEPT_ENV = "reb-ray.env-kept"


def process_start_ticks(pid: int) -> int | None:
    """Start time of `pid` in clock ticks since boot, or None if no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    fields = stat[stat.rfind(")") + 2 :].split()
    return int(fields[19])


@dataclass(frozen=True)
class Owner:
    """The process that owns a container."""

    host: str
    pid: int
    start_ticks: int | None

    @classmethod
    def current(cls) -> "Owner":
        pid = os.getpid()
        return cls(socket.gethostname(), pid, process_start_ticks(pid))

    @classmethod
    def from_labels(cls, labels: dict[str, str]) -> "Owner | None":
        try:
            start = labels.get(OWNER_START)
            return cls(labels[OWNER_HOST], int(labels[OWNER_PID]), int(start) if start else None)
        except (KeyError, ValueError):
            return None

    def labels(self) -> dict[str, str]:
        return {
            OWNER_HOST: self.host,
            OWNER_PID: str(self.pid),
            OWNER_START: "" if self.start_ticks is None else str(self.start_ticks),
        }

    def is_local(self) -> bool:
        return self.host == socket.gethostname()

    def is_alive(self) -> bool:
        """True if the owner still runs. Only meaningful for an owner on this host."""
        ticks = process_start_ticks(self.pid)
        return ticks is not None and (self.start_ticks is None or ticks == self.start_ticks)


def container_labels(sweep_id: str, trial_id: str, attempt: int, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The full label set for a new container owned by this process."""
    labels = dict(extra or {})
    labels.update(
        {MANAGED: "true", SWEEP: sweep_id, TRIAL: trial_id, ATTEMPT: str(attempt)},
    )
    labels.update(Owner.current().labels())
    return labels
