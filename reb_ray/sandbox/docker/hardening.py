"""The privileges of a Docker sandbox: what an untrusted agent may and may not do.

An agent runs whatever a model decides, as root inside its container. The container therefore
gets `no-new-privileges` (no setuid binary or file capability can raise a process's
privileges), every capability dropped and only `CAPABILITIES` added back, and a pids limit
(the config's, `reb_ray.sandbox.base.DEFAULT_PIDS_LIMIT` unless the sweep sets one: a fork
bomb stops at it instead of exhausting the node's process table).

`CAPABILITIES` is what package managers need, proved by tests/sandbox/test_hardening.py
(`pip install`, `apt-get install`, building a C extension): CHOWN/FOWNER/FSETID/DAC_OVERRIDE
(dpkg and pip unpack files with owners and modes), SETUID/SETGID (apt drops to the `_apt`
user to download), KILL (the harness and agents signal processes), SETFCAP (dpkg installs
files with capabilities, e.g. ping), NET_BIND_SERVICE (a server on a port below 1024).
Dropped from Docker's defaults: NET_RAW (raw sockets: ARP/ICMP spoofing on the bridge),
MKNOD (device nodes), SYS_CHROOT, SETPCAP, AUDIT_WRITE. Never given: SYS_ADMIN (mount,
setns/nsenter), SYS_PTRACE, NET_ADMIN.
"""

from __future__ import annotations

from typing import Any

CAPABILITIES = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "SETUID", "SETGID", "KILL", "SETFCAP", "NET_BIND_SERVICE")


def hardening_kwargs(pids_limit: int | None, memory_bytes: int | None) -> dict[str, Any]:
    """The `containers.run` keyword arguments that restrict a sandbox (pure).

    `pids_limit` None: Docker's default (none). `memory_bytes` also caps memory+swap at the
    same value, so a sandbox over its memory is OOM-killed instead of swapping the node.
    """
    kwargs: dict[str, Any] = {
        "privileged": False,
        "security_opt": ["no-new-privileges"],
        "cap_drop": ["ALL"],
        "cap_add": list(CAPABILITIES),
    }
    if pids_limit is not None:
        kwargs["pids_limit"] = pids_limit
    if memory_bytes is not None:
        kwargs["mem_limit"] = memory_bytes
        kwargs["memswap_limit"] = memory_bytes
    return kwargs


#: The keys of `hardening_kwargs` (the benchmark removes them to measure today's start).
HARDENING_KEYS = ("security_opt", "cap_drop", "cap_add", "pids_limit", "memswap_limit")
