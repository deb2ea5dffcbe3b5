"""The node's port range for the proxies docker sandboxes may reach.

Every proxy a sandbox on one of reb-ray's networks (network.py) is allowed to talk to (its
trial's egress proxy under `registries`, the node's LLM proxy) listens on that network's
gateway at a port inside one fixed range, so the host guard (hostguard.py) opens that range
once, with static rules, instead of adding and
removing a rule per proxy (a rule per proxy would outlive a trial actor Ray kills with SIGKILL,
and leave the next process that takes its port reachable).

The range is a node setting, `REB_RAY_SANDBOX_PORTS=LO-HI` (inclusive) in the environment of
`ray start` (every worker and the LLM proxy actor inherit it), default 29000-29999: below
Linux's ephemeral range (32768-60999, where the ports Ray picks at random come from), above
Ray's worker ports (10002-19999) and clear of its fixed ports (6379, 8265, 10001, 52365). Any
other host service listening on all addresses inside it would be reachable: keep it free.
"""

from __future__ import annotations

import errno
import os
import random
import socket

from reb_ray.errors import RebRayError

PORTS_ENV = "REB_RAY_SANDBOX_PORTS"
DEFAULT_PORTS = range(29000, 30000)


def sandbox_ports() -> range:
    """The node's proxy port range (`PORTS_ENV`, else DEFAULT_PORTS). Raises RebRayError
    naming the variable and its value when it is not `LO-HI` with 1024 <= LO <= HI <= 65535."""
    value = os.environ.get(PORTS_ENV, "").strip()
    if not value:
        return DEFAULT_PORTS
    lo, sep, hi = value.partition("-")
    if sep and lo.strip().isdigit() and hi.strip().isdigit() and 1024 <= int(lo) <= int(hi) <= 65535:
        return range(int(lo), int(hi) + 1)
    raise RebRayError(f"{PORTS_ENV}={value!r}: expected LO-HI, two ports with 1024 <= LO <= HI <= 65535")


def bind_in(host: str, ports: range) -> socket.socket:
    """A TCP socket listening on `host` at the first free port of `ports`, tried from a random
    start (concurrent trials on a node rarely contend for the same port). Raises RebRayError
    when every port is taken, or the address cannot be bound at all."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    start = random.randrange(len(ports))
    for i in range(len(ports)):
        port = ports[(start + i) % len(ports)]
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio's servers do
        try:
            sock.bind((host, port))
            sock.listen(128)
        except OSError as exc:
            sock.close()
            if exc.errno == errno.EADDRINUSE:
                continue
            raise RebRayError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        sock.setblocking(False)
        return sock
    raise RebRayError(f"no free port on {host} in {ports.start}-{ports.stop - 1} ({PORTS_ENV}): "
                      f"every one is in use")
