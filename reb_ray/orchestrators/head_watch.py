"""The driver's watch on the head: the GCS and the raylet the driver is attached to.

Ray 2.60 has no GCS fault tolerance without an external Redis. When the head's GCS dies, no
raylet and no driver ever gets it back: the driver's core worker keeps running actor calls for
a while and then ends the whole process about 60 s later (`gcs_rpc_server_reconnect_timeout_s`)
with a fatal log, not a Python exception, and any GCS call made meanwhile (`ray.nodes()`, the
orchestrator's poll for new nodes) blocks until then. When the raylet the driver is attached to
dies (on the head, where the driver runs), the GCS marks that node dead 10-15 s later and every
actor the driver owns dies with "owner's node has crashed": every attempt in flight and every
replacement slot would become an infra row until the trials' retries are spent.

So the driver does not wait for Ray: `HeadWatch` opens a TCP connection to the GCS port and to
the driver's raylet's node-manager port every `interval_s` (0.5 s). A killed process refuses
at once; a connection is answered by the kernel's listen backlog, so a busy machine does not
look like a dead head. When either address has failed for `lost_after_s` (3 s) without a
success in between, `on_lost(what)` is called once, from the watch's thread, with a few words
naming what died. Neither process comes back on its port (a new GCS is a new cluster), so
there is no point in waiting longer. Limit: a GCS that hangs but whose port still accepts
connections is not seen here; Ray's own 60 s path ends that driver.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from typing import Callable

from reb_ray.errors import RebRayError

INTERVAL_S = 0.5  # seconds between two probes of each address
LOST_AFTER_S = 3.0  # seconds of failed probes, none answered, before the head counts as lost
PROBE_TIMEOUT_S = 1.0  # one connection attempt's bound (a refused one returns at once)


#: The exit status of a `reb-ray sweep` that stopped because the head died (2 is a user error,
#: 130 an interrupt): the rows written are kept, and the same command resumes.
HEAD_LOST_EXIT = 3


class HeadLost(RebRayError):
    """The head (its GCS, or the raylet the driver is attached to) died mid-sweep; the message
    is the one line the user sees."""


@dataclass(frozen=True)
class Watched:
    """One address the watch probes: what it is, in words for the user's line, and where."""

    what: str
    host: str
    port: int


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def driver_targets() -> list[Watched]:
    """The connected driver's GCS and its own raylet (`ray.init` must have run). The raylet is
    named "the head's raylet" when the driver's node is the head (the usual set-up: the driver
    runs on the head), else "the raylet of the driver's node"."""
    import ray

    node = ray._private.worker.global_worker.node
    gcs_host, gcs_port = _split(node.gcs_address)
    mine = ray.get_runtime_context().get_node_id()
    head = any(n.get("NodeID") == mine and "node:__internal_head__" in (n.get("Resources") or {}) for n in ray.nodes())
    raylet = "the head's raylet" if head else "the raylet of the driver's node"
    return [Watched("the head's GCS", gcs_host, gcs_port),
            Watched(raylet, node.node_ip_address, int(node.node_manager_port))]


def _problem(target: Watched, timeout_s: float) -> str | None:
    """None when `target` accepts a TCP connection within `timeout_s`, else why not in a few words."""
    try:
        with socket.create_connection((target.host, target.port), timeout=timeout_s):
            return None
    except OSError as exc:
        return exc.strerror or type(exc).__name__


class HeadWatch:
    """Probes `targets` from a daemon thread (module docstring); calls `on_lost(what)` once,
    `what` being e.g. "the head's GCS at 10.0.0.1:6379 is gone (Connection refused for 3.0 s)".
    `start()` begins, `stop()` ends the thread (it is also a daemon: it never holds a process)."""

    def __init__(self, targets: list[Watched], on_lost: Callable[[str], None], *, interval_s: float = INTERVAL_S,
                 lost_after_s: float = LOST_AFTER_S, probe_timeout_s: float = PROBE_TIMEOUT_S) -> None:
        self.targets = targets
        self.on_lost = on_lost
        self.interval_s = interval_s
        self.lost_after_s = lost_after_s
        self.probe_timeout_s = probe_timeout_s
        self.lost: str | None = None  # what on_lost was told, once it was
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="reb-ray head watch", daemon=True)

    def start(self) -> HeadWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(self.probe_timeout_s * len(self.targets) + self.interval_s + 1.0)

    def _run(self) -> None:
        failing_since: dict[Watched, float] = {}
        while not self._stop.is_set():
            for target in self.targets:
                problem = _problem(target, self.probe_timeout_s)
                if problem is None:
                    failing_since.pop(target, None)
                    continue
                since = failing_since.setdefault(target, time.monotonic())
                if time.monotonic() - since >= self.lost_after_s and not self._stop.is_set():
                    self.lost = (f"{target.what} at {target.host}:{target.port} is gone ({problem} for "
                                 f"{time.monotonic() - since:.1f} s)")
                    self.on_lost(self.lost)
                    return
            self._stop.wait(self.interval_s)
