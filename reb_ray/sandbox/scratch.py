"""Host scratch directories that name their owner, and removing those whose owner is gone.

An attempt makes host directories in the temporary directory (its workspace, its staging of
logs, a local sandbox's root; a re-probe and an export verified on its node, theirs) and
removes them on every path it controls. A slot worker killed
with SIGKILL, or cancelled between making one and entering its `try`, cannot: its directories
stay for ever and fill the node's /tmp over a long campaign. So each such directory carries
its owner in its name, `<prefix><pid>.<start ticks>.<place>-<random>`, the same pid and start
time as the owner labels of our containers (`Owner`, so a recycled pid is never mistaken for
the owner), and `reap_scratch` removes those whose owner no longer runs. Writing no file inside
keeps the directory exactly as its user sees it (a workspace is copied into a sandbox).

A pid means something only in the PID namespace it was read in, and the temporary directory is
often shared beyond one: a node in a container or `unshare`d namespace with the host's /tmp sees
the host's directories, whose pids are absent or someone else there. `<place>` (8 hex digits of
the host name and the PID namespace) names where the pid was read, and a reaper judges only the
directories of its own place: without it, such a node's sweep removed the live staging of an
attempt running beside it on the host.

Directories of live owners, of other places, and names that do not parse (another tool's, an
older reb-ray's) are never touched.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from pathlib import Path

from reb_ray.sandbox.ownership import Owner

#: The prefixes of every scratch directory an attempt makes on its node.
PREFIXES = ("reb-ray-trial-", "reb-ray-artifacts-", "reb-ray-local-", "reb-ray-reprobe-",
            "reb-ray-verify-export-")
_NAME = re.compile(r"^(?P<prefix>" + "|".join(map(re.escape, PREFIXES))
                   + r")(?P<pid>\d+)\.(?P<ticks>\d+|x)\.(?P<place>[0-9a-f]{8})-[^/]+$")


def place() -> str:
    """Where this process's pids mean something: 8 hex digits of the host name and the PID
    namespace (its inode; "?" where /proc does not say)."""
    try:
        pid_ns = str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        pid_ns = "?"
    return hashlib.sha256(f"{Owner.current().host}\0{pid_ns}".encode()).hexdigest()[:8]


def make_scratch(prefix: str, root: Path | None = None) -> Path:
    """A new private directory (mode 0700) named for this process: `mkdtemp` with the owner in
    its prefix. `prefix` must be one of `PREFIXES`, so that `reap_scratch` knows it."""
    if prefix not in PREFIXES:
        raise ValueError(f"scratch prefix {prefix!r} is not one of {PREFIXES}")
    owner = Owner.current()
    ticks = "x" if owner.start_ticks is None else str(owner.start_ticks)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{owner.pid}.{ticks}.{place()}-", dir=root))


def owner_of(path: Path, here: str | None = None) -> Owner | None:
    """The owner a scratch directory's name gives, or None: a name that does not parse, or one
    made in another place than `here` (default: `place()`), whose pid says nothing here."""
    match = _NAME.match(path.name)
    if match is None or match["place"] != (here or place()):
        return None
    ticks = match["ticks"]
    return Owner(Owner.current().host, int(match["pid"]), None if ticks == "x" else int(ticks))


def reap_scratch(root: Path | None = None) -> list[Path]:
    """Remove the scratch directories under `root` (default: the temporary directory) whose
    owner no longer runs; returns them. A directory that vanishes meanwhile is skipped."""
    root = Path(root or tempfile.gettempdir())
    removed, here = [], place()  # read once: /tmp may hold thousands of entries
    for path in root.iterdir() if root.is_dir() else ():
        owner = owner_of(path, here)
        if owner is None or owner.is_alive() or not path.is_dir() or path.is_symlink():
            continue
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            removed.append(path)
    return removed
