"""What a container's engine shows of it from outside: its processes and its files, read
where no process of the container can hide, rename or rewrite what is read.

Processes: the engine's `top` lists the container's cgroup with host PIDs. When the container
starts, that list holds exactly what the harness started (the init and its keep-alive), so
those host PIDs are recorded then (`own_at_start`), together with each one's PID inside the
container and its start time (clock ticks since boot) for the in-container kill script, which
spares a process only when both match (`reb_ray.sandbox.docker.docker_sandbox`). The inner
PID is read from the host's /proc (`NSpid`) when the engine runs on this kernel (the process's
cgroup names the container), else by one exec run before any other.

Files: git blob hashes of paths under a container directory, read from the container's merged
overlay directory on the host (this process must be able to read it: root and the overlay2
driver) with every path component opened without following links, else from the engine's
archive of the directory (a tar stream, links kept as links). Neither runs a program of the
container, so no filter, attribute, index flag, replaced `git` or replaced libc applies.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
import tarfile
import time
from typing import Any, Iterator

from docker.errors import DockerException

from reb_ray.errors import RebRayError
from reb_ray.sandbox.base import SandboxProcess, git_blob

#: Seconds to wait, after the container started, for its init to have started its keep-alive.
OWN_WAIT_S = 10.0
_CHUNK = 1 << 20

# Prints "PID STARTTIME" for each child of PID 1 (the keep-alive): the fallback when the host's
# /proc cannot map host PIDs to the container's.
_CHILDREN_SCRIPT = r"""
for p in $(cat /proc/1/task/1/children); do
  printf '%s %s\n' "$p" "$(sed 's/.*) //' "/proc/$p/stat" | cut -d' ' -f20)"
done
"""


def top(api: Any, container_id: str, ps_args: str | None = None) -> list[tuple[int, int, str]]:
    """(host PID, host parent PID, command line) of every process of the container, as the
    engine's `top` lists its cgroup. `ps_args`: the listing's columns where the engine's own
    default would run the container's `ps` (Podman: `hpid,ppid,args`, which it reads from
    /proc itself; an `HPID` column is the host PID). Raises DockerException, or RebRayError for
    a listing without PID columns (one whose titles are one string came from a `ps` in the
    container, which the agent could have replaced: never read)."""
    listing = api.top(container_id, ps_args=ps_args) if ps_args else api.top(container_id)
    titles = [t.upper() for t in listing.get("Titles") or []]
    try:
        pid_at = titles.index("HPID") if "HPID" in titles else titles.index("PID")
        ppid_at = titles.index("PPID")
    except ValueError:
        raise RebRayError(f"the engine's process list has no PID/PPID columns: {titles}") from None
    cmd_at = next((titles.index(t) for t in ("CMD", "COMMAND") if t in titles), len(titles) - 1)
    rows = []
    for proc in listing.get("Processes") or []:
        try:
            rows.append((int(proc[pid_at]), int(proc[ppid_at]), " ".join(proc[cmd_at:]) if cmd_at == len(titles) - 1
                         else proc[cmd_at]))
        except (ValueError, IndexError):
            continue
    return rows


def process_table(api: Any, container_id: str, own: frozenset[int],
                  ps_args: str | None = None) -> list[SandboxProcess] | None:
    """The container's processes from outside (`top`), each marked whether its host PID is in
    `own`; None when the engine does not answer."""
    try:
        rows = top(api, container_id, ps_args)
    except (DockerException, RebRayError):
        return None
    return [SandboxProcess(pid, ppid, cmd, pid in own) for pid, ppid, cmd in rows]


def own_at_start(api: Any, container_id: str, exec_script,
                 ps_args: str | None = None) -> tuple[frozenset[int], tuple[tuple[int, int], ...]]:
    """(the host PIDs of every process of a container that just started, the (inner PID, start
    time) of each but its init). Waits up to OWN_WAIT_S for the init's child to exist.
    `exec_script(script) -> str` runs a shell script in the container (the fallback mapping).
    Raises RebRayError when the keep-alive never shows or cannot be identified."""
    deadline = time.monotonic() + OWN_WAIT_S
    while True:
        try:
            rows = top(api, container_id, ps_args)
        except DockerException as exc:
            raise RebRayError(f"cannot list the sandbox's processes: {exc}") from None
        if len(rows) >= 2 or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    if len(rows) < 2:
        raise RebRayError(f"the sandbox's keep-alive did not start within {OWN_WAIT_S:g} s")
    host = frozenset(pid for pid, _, _ in rows)
    inner = _inner_from_host(rows, container_id)
    if inner is None:
        inner = []
        for line in exec_script(_CHILDREN_SCRIPT).splitlines():
            words = line.split()
            if len(words) == 2 and all(w.isdigit() for w in words):
                inner.append((int(words[0]), int(words[1])))
    if not inner:
        raise RebRayError("cannot identify the sandbox's keep-alive process")
    return host, tuple(inner)


def _inner_from_host(rows: list[tuple[int, int, str]], container_id: str) -> list[tuple[int, int]] | None:
    """(inner PID, start time) of each process but the init, read from this host's /proc; None
    when a process is not this kernel's process of that container (a remote engine)."""
    out = []
    for pid, _, _ in rows:
        try:
            with open(f"/proc/{pid}/cgroup") as f:
                if container_id not in f.read():
                    return None
            with open(f"/proc/{pid}/status") as f:
                nspid = next((line.split()[1:] for line in f if line.startswith("NSpid:")), None)
            with open(f"/proc/{pid}/stat") as f:
                start = int(f.read().rsplit(")", 1)[1].split()[19])
        except (OSError, ValueError, IndexError):
            return None
        if not nspid:
            return None
        if nspid[-1] != "1":
            out.append((int(nspid[-1]), start))
    return out


# -- files ---------------------------------------------------------------------------------

def blobs_outside(api: Any, container_id: str, root: str, paths: list[str]) -> dict[str, str | None] | None:
    """Git blob hashes of `paths` under container directory `root` (`Sandbox.blobs_outside`):
    from the merged overlay directory when this process can read it and no mount covers
    `root`, else from the engine's archive. None when neither can be read."""
    try:
        attrs = api.inspect_container(container_id)
    except DockerException:
        return None
    merged = ((attrs.get("GraphDriver") or {}).get("Data") or {}).get("MergedDir")
    mounted = any(_overlaps(m.get("Destination") or "", root) for m in attrs.get("Mounts") or [])
    if merged and not mounted and os.access(merged, os.R_OK | os.X_OK):
        try:
            return _from_merged(merged, root, paths)
        except OSError:
            pass
    try:
        return _from_archive(api, container_id, root, paths)
    except (DockerException, tarfile.TarError, OSError):
        return None


def _overlaps(mount: str, root: str) -> bool:
    a, b = mount.rstrip("/") + "/", root.rstrip("/") + "/"
    return a.startswith(b) or b.startswith(a)


def _open_dir(parent: int, name: str) -> int:
    return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)


def _from_merged(merged: str, root: str, paths: list[str]) -> dict[str, str | None]:
    """Every component opened relative to its parent without following links, so a link the
    container holds never leads out of its tree (nor anywhere: a path through one is None)."""
    out: dict[str, str | None] = {}
    top_fd = os.open(merged, os.O_RDONLY | os.O_DIRECTORY)
    dirs: dict[str, int | None] = {}
    try:
        base: int | None = top_fd
        for part in [p for p in root.split("/") if p]:
            try:
                nxt = _open_dir(base, part)
            except OSError:
                nxt = None
            if base != top_fd:
                os.close(base)
            base = nxt
            if base is None:
                return {path: None for path in paths}
        dirs[""] = base
        for path in paths:
            parent, _, name = path.rpartition("/")
            fd = _dir_of(dirs, parent)
            out[path] = None if fd is None else _blob_in(fd, name)
    finally:
        for fd in {fd for fd in dirs.values() if fd is not None}:
            os.close(fd)
        os.close(top_fd)
    return out


def _dir_of(dirs: dict[str, int | None], rel: str) -> int | None:
    """The fd of repository subdirectory `rel`, opened component by component (cached)."""
    if rel in dirs:
        return dirs[rel]
    parent, _, name = rel.rpartition("/")
    up = _dir_of(dirs, parent)
    try:
        fd = None if up is None else _open_dir(up, name)
    except OSError:
        fd = None
    dirs[rel] = fd
    return fd


def _blob_in(dir_fd: int, name: str) -> str | None:
    try:
        st = os.lstat(name, dir_fd=dir_fd)
        if stat.S_ISLNK(st.st_mode):
            return git_blob(os.fsencode(os.readlink(name, dir_fd=dir_fd)))
        if not stat.S_ISREG(st.st_mode):
            return None
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dir_fd)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        return _stream_blob(os.fstat(f.fileno()).st_size, iter(lambda: f.read(_CHUNK), b""))


def _stream_blob(size: int, chunks: Iterator[bytes]) -> str | None:
    """The blob hash of `size` bytes read as `chunks` (None when their length is not `size`: the
    file changed under the read)."""
    digest, seen = hashlib.sha1(b"blob %d\0" % size), 0
    for chunk in chunks:
        digest.update(chunk)
        seen += len(chunk)
    return digest.hexdigest() if seen == size else None


class _Chunks(io.RawIOBase):
    """A readable file over the engine's archive stream (an iterator of byte chunks)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks, self._left = chunks, b""

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        while not self._left:
            try:
                self._left = next(self._chunks)
            except StopIteration:
                return 0
        n = min(len(buf), len(self._left))
        buf[:n], self._left = self._left[:n], self._left[n:]
        return n


def _from_archive(api: Any, container_id: str, root: str, paths: list[str]) -> dict[str, str | None]:
    """From the engine's tar stream of `root`: members are `<basename of root>/<path>`; a link
    stays a link, so a path through one has no member (None)."""
    stream, _ = api.get_archive(container_id, root, chunk_size=_CHUNK)
    wanted = set(paths)
    out: dict[str, str | None] = {path: None for path in paths}
    prefix = root.rstrip("/").rsplit("/", 1)[-1] + "/"
    with tarfile.open(fileobj=io.BufferedReader(_Chunks(iter(stream)), _CHUNK), mode="r|") as tar:
        for member in tar:
            rel = member.name[len(prefix):] if member.name.startswith(prefix) else None
            if rel not in wanted:
                continue
            if member.issym():
                out[rel] = git_blob(os.fsencode(member.linkname))
            elif member.islnk():
                target = member.linkname[len(prefix):] if member.linkname.startswith(prefix) else None
                out[rel] = out.get(target) if target in wanted else None
            elif member.isfile():
                f = tar.extractfile(member)
                out[rel] = None if f is None else _stream_blob(member.size, iter(lambda: f.read(_CHUNK), b""))
    return out
