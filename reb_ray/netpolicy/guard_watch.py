"""Keeping the host guard in place while sandboxes run: a watch on a timer.

`ensure_guard` (hostguard.py) puts the guard's chain and its jump from INPUT in place before a
trial's first sandbox exists. A firewall manager that flushes INPUT or the chain afterwards
(firewalld's reload, `iptables -F`) would leave every running sandbox free to reach the node's
services until the next trial starts. So while any trial of this process holds a guarded
network, one thread per guard (network) re-runs `ensure_guard` every INTERVAL_S seconds: a
read of the filter table (a few ms) when all is in place, the one atomic rewrite when it is not.
The exposure after a flush is therefore at most INTERVAL_S plus one rewrite, measured in the
tests at about that.

A failed re-assertion (iptables gone, root lost) is logged as a warning and retried at the next
tick; it cannot fail a trial already running, and the next trial's own `ensure_guard` fails it
as infra (`infra_network_guard`). Each re-assertion that had something to rewrite is logged and
counted (`reasserted`).
"""

from __future__ import annotations

import logging
import threading

from reb_ray.errors import InfraError

log = logging.getLogger(__name__)

#: Seconds between two checks of the guard while a trial holds it.
INTERVAL_S = 2.0

_lock = threading.Lock()
_watches: dict[tuple, "_Watch"] = {}


class _Watch:
    def __init__(self, key: tuple) -> None:
        self.key = key
        self.holders = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"reb-ray-guard-watch-{key[3]}", daemon=True)

    def _run(self) -> None:
        from reb_ray.netpolicy.hostguard import ensure_guard

        bridge, gateway, ports, chain = self.key
        while not self.stop.wait(INTERVAL_S):
            try:
                if ensure_guard(bridge, gateway, ports, chain):
                    _count()
                    log.warning("host guard %s for %s was missing or changed: re-asserted", chain, bridge)
            except InfraError as exc:
                log.warning("host guard %s: cannot re-assert it: %s", chain, exc)


_reasserted = {"n": 0}


def _count() -> None:
    with _lock:
        _reasserted["n"] += 1


def reasserted() -> int:
    """Re-assertions in this process that had something to rewrite (since it started)."""
    return _reasserted["n"]


def hold(bridge: str, gateway: str, ports: range, chain: str) -> tuple:
    """Start watching the guard of `bridge`/`chain` (or join the watch already running);
    returns the key to `release` it with."""
    key = (bridge, gateway, ports, chain)
    with _lock:
        watch = _watches.get(key)
        if watch is None:
            watch = _watches[key] = _Watch(key)
            watch.thread.start()
        watch.holders += 1
    return key


def release(key: tuple) -> None:
    """One holder of the watch `key` is done; the last one stops it. Never raises."""
    with _lock:
        watch = _watches.get(key)
        if watch is None:
            return
        watch.holders -= 1
        if watch.holders > 0:
            return
        del _watches[key]
    watch.stop.set()
