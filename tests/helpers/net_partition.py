"""A network partition of some processes of this machine, made real with a cgroup and iptables.

Every raylet of the test cluster runs as the same user on the same address and talks to the
others over `lo`, and a node's own connections to the GCS go to the same port as every other
node's, so neither ports nor `--uid-owner` can tell one node's packets from another's. What
can is the sending socket's cgroup: `iptables -m cgroup --path P` (cgroup v2) matches packets
of sockets made by processes in the cgroup P. A socket keeps the cgroup it was made in, so the
node must start inside it: `joined()` moves this process into the cgroup for the length of
the block (the raylet it starts there, and every worker that raylet forks later, inherit it)
and back out after.

`cut()` adds, in a chain of its own, DROP rules for that cgroup on `lo`: OUTPUT (everything the
node sends, replies included, so no TCP connection to or from it gets through) and INPUT
(packets to its sockets). `heal()` removes the jumps; `close()` heals and removes the chain and
the cgroup (which must be empty then: the node shut down). Needs root, a cgroup v2 mount (the
unified hierarchy of a hybrid machine is enough) and the iptables cgroup match;
`missing()` names what is not there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


def cgroup2_root() -> Path | None:
    """Where cgroup v2 is mounted (the unified hierarchy), or None."""
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) > 2 and fields[2] == "cgroup2":
            return Path(fields[1])
    return None


def _own_cgroup() -> str:
    """This process's cgroup v2 path ("/" at the root), from /proc/self/cgroup's `0::` line."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        if line.startswith("0::"):
            return line[3:] or "/"
    return "/"


def _iptables(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(["iptables", "-w", *args], capture_output=True, text=True)
    if check and result.returncode != 0:
        raise RuntimeError(f"iptables {' '.join(args)}: {result.stderr.strip()}")
    return result


def missing() -> str | None:
    """Why a partition cannot be made here (not root, no cgroup v2, no iptables cgroup match), or None."""
    if os.geteuid() != 0:
        return "not root (the cgroup and the iptables rules need it)"
    if cgroup2_root() is None:
        return "no cgroup v2 mount"
    if shutil.which("iptables") is None:
        return "no iptables"
    help_text = _iptables("-m", "cgroup", "-h", check=False)
    if "--path" not in help_text.stdout + help_text.stderr:
        return "iptables has no cgroup match with --path"
    return None


class Partition:
    """One cgroup and its DROP chain (module docstring)."""

    def __init__(self) -> None:
        root = cgroup2_root()
        assert root is not None, missing()
        token = uuid.uuid4().hex[:8]
        self.name = f"reb-ray-partition-{token}"  # the cgroup, relative to the cgroup2 root
        self.path = root / self.name
        self.chain = f"RRPART-{token}"
        self._home = root / _own_cgroup().lstrip("/")
        self.path.mkdir()
        _iptables("-N", self.chain)
        _iptables("-A", self.chain, "-m", "cgroup", "--path", self.name, "-j", "DROP")
        self._jumps = [("OUTPUT", "-o", "lo"), ("INPUT", "-i", "lo")]
        self.cut_now = False

    @contextmanager
    def joined(self) -> Iterator[None]:
        """This process inside the cgroup for the block: whatever it starts meanwhile stays there."""
        (self.path / "cgroup.procs").write_text(str(os.getpid()))
        try:
            yield
        finally:
            (self._home / "cgroup.procs").write_text(str(os.getpid()))

    def pids(self) -> list[int]:
        return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]

    def cut(self) -> None:
        for chain, flag, device in self._jumps:
            _iptables("-I", chain, "1", flag, device, "-j", self.chain)
        self.cut_now = True

    def heal(self) -> None:
        for chain, flag, device in self._jumps:
            while _iptables("-C", chain, flag, device, "-j", self.chain, check=False).returncode == 0:
                _iptables("-D", chain, flag, device, "-j", self.chain)
        self.cut_now = False

    def close(self) -> None:
        self.heal()
        _iptables("-F", self.chain, check=False)
        _iptables("-X", self.chain, check=False)
        try:
            self.path.rmdir()
        except OSError:  # processes left in it (a node not shut down): move them home first
            for pid in self.pids():
                try:
                    (self._home / "cgroup.procs").write_text(str(pid))
                except OSError:
                    pass
            self.path.rmdir()
