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

import os

# The variable, its default and the bind live with the server thread that binds in the range.
from reb_ray.background import DEFAULT_PORTS, PORTS_ENV, bind_in  # noqa: F401
from reb_ray.errors import RebRayError


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
