"""The files a container changed since its image, read from its overlay layers on the host.

`docker diff` answers this for any storage driver by mounting the container's filesystem and its
image's side by side and comparing every path of both trees (Docker's "naive diff": one lstat and
one extended-attribute read per path, about a second of the daemon's CPU for an 866 MB image,
once per trial). With the overlay2 driver the changes are already apart: the container's upper
directory holds exactly what was written, and the lower directories (the image's layers and the
container's init layer, top first) hold what it was compared with. `overlay_changes` walks only the
upper directory and, for each path there, the same path in the lower layers, and reports what
`docker diff` reports, by the same rules:

- a path in the container's view that the image's view lacks is added (kind 1), and so is every
  path under an added directory;
- a path in both is changed (kind 0) when its mode, owner, group or device differs or, for a
  non-directory, its size or modification time does (a time with no nanoseconds matches any
  nanoseconds of the same second), or its `security.capability` attribute differs;
- a path of the image's view missing from the container's is deleted (kind 2): an overlay
  whiteout (a character device 0:0), or a child of an opaque directory (one that replaced the
  image's directory of that name) that the container's directory lacks; under a deleted
  directory nothing more is listed;
- a directory that is neither added nor changed but has changes under it is listed as changed,
  before them, except the root.

A path the upper directory lacks is the image's own, unchanged with everything under it, so the
walk never descends there. Only for a daemon whose overlay2 directories this process can read as
root (opaque directories are marked by a `trusted.` attribute, which only root reads); anywhere
else (another driver, a remote or rootless engine) `container_changes` asks the engine.
"""

from __future__ import annotations

import os
import stat
from typing import Any

#: Docker's change kinds, as its API numbers them.
CHANGED, ADDED, DELETED = 0, 1, 2
OPAQUE_XATTR = "trusted.overlay.opaque"
CAPABILITY_XATTR = "security.capability"
#: AUFS metadata names Docker leaves out of its comparison.
_AUFS_META = ".wh..wh."


def container_changes(client: Any, container_id: str) -> list[dict]:
    """The container's changes since its image as the engine's API lists them
    ([{"Path", "Kind"}]), read from the overlay layers when `overlay_layers` finds them readable,
    from the engine otherwise. Raises what the engine's client raises."""
    layers = overlay_layers(client.api.inspect_container(container_id))
    if layers is not None:
        try:
            return overlay_changes(*layers)
        except OSError:
            pass  # a layer went away or became unreadable mid-walk: the engine's answer stands
    return client.api.diff(container_id) or []


def overlay_layers(attrs: dict) -> tuple[str, list[str]] | None:
    """(upper directory, lower directories top first) of an inspected container when its
    storage driver is overlay2 and this process, as root, can read them; None otherwise."""
    driver = attrs.get("GraphDriver") or {}
    data = driver.get("Data") or {}
    upper, lower = data.get("UpperDir"), data.get("LowerDir")
    if driver.get("Name") != "overlay2" or not upper or not lower or os.geteuid() != 0:
        return None
    lowers = lower.split(":")
    if not all(os.path.isdir(d) and os.access(d, os.R_OK | os.X_OK) for d in [upper, *lowers]):
        return None
    return upper, lowers


def overlay_changes(upper: str, lowers: list[str]) -> list[dict]:
    """The changes of the overlay (`upper` over `lowers`, top first) against `lowers` alone, by
    `docker diff`'s rules (module docstring); [{"Path": "/a/b", "Kind": 0|1|2}]."""
    changes: list[dict] = []
    upper_prefix = upper.rstrip("/") + "/"

    def walk(path: str, new_dirs: list[str], old_dirs: list[str] | None, added: bool) -> None:
        start = len(changes)
        new_children = _merged_children(new_dirs)
        old_children = _merged_children(old_dirs) if old_dirs else {}
        for name, new_paths in new_children.items():
            old_paths = old_children.pop(name, None)
            if not new_paths[0].startswith(upper_prefix):
                continue  # the image's own entry: nothing under it changed
            child = f"{path}/{name}"
            new_stat = os.lstat(new_paths[0])
            old_stat = os.lstat(old_paths[0]) if old_paths is not None else None
            child_added = True
            if old_stat is None:
                changes.append({"Path": child, "Kind": ADDED})
            elif _differs(old_stat, new_stat, old_paths[0], new_paths[0]):
                changes.append({"Path": child, "Kind": CHANGED})
            else:
                child_added = False
            if stat.S_ISDIR(new_stat.st_mode):
                old_is_dir = old_stat is not None and stat.S_ISDIR(old_stat.st_mode)
                walk(child, new_paths, old_paths if old_is_dir else None, child_added)
        for name in old_children:
            changes.append({"Path": f"{path}/{name}", "Kind": DELETED})
        if len(changes) > start and not added and path:
            changes.insert(start, {"Path": path, "Kind": CHANGED})

    walk("", [upper, *lowers], lowers, False)
    return changes


def _merged_children(dirs: list[str]) -> dict[str, list[str]]:
    """The entries of one directory of an overlay whose layers of it are `dirs` (top first):
    {name: real paths, top first}. A non-directory has its one path; a directory has its path in
    each layer down to the first opaque one or the first non-directory. A whiteout hides the name
    in the layers below it."""
    found: dict[str, list[str]] = {}
    closed: set[str] = set()
    for directory in dirs:
        try:
            names = os.listdir(directory)
        except (FileNotFoundError, NotADirectoryError):
            continue
        for name in names:
            if name in closed or name.startswith(_AUFS_META):
                continue
            path = os.path.join(directory, name)
            st = os.lstat(path)
            is_dir = stat.S_ISDIR(st.st_mode)
            if name in found:  # a directory above: it merges with a directory here
                if is_dir:
                    found[name].append(path)
                    if _opaque(path):
                        closed.add(name)
                else:
                    closed.add(name)
                continue
            if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:  # a whiteout
                closed.add(name)
                continue
            found[name] = [path]
            if not is_dir or _opaque(path):
                closed.add(name)
    return found


def _opaque(path: str) -> bool:
    try:
        return os.getxattr(path, OPAQUE_XATTR, follow_symlinks=False) == b"y"
    except OSError:
        return False


def _capability(path: str) -> bytes | None:
    try:
        return os.getxattr(path, CAPABILITY_XATTR, follow_symlinks=False)
    except OSError:
        return None


def _differs(old: os.stat_result, new: os.stat_result, old_path: str, new_path: str) -> bool:
    """Docker's test of a changed path: mode, owner, group, device; for a non-directory also
    size and modification time (seconds equal and nanoseconds equal or either zero); or the
    file capabilities."""
    if (old.st_mode, old.st_uid, old.st_gid, old.st_rdev) != (new.st_mode, new.st_uid, new.st_gid, new.st_rdev):
        return True
    if not stat.S_ISDIR(old.st_mode):
        old_s, old_ns = divmod(old.st_mtime_ns, 1_000_000_000)
        new_s, new_ns = divmod(new.st_mtime_ns, 1_000_000_000)
        if old.st_size != new.st_size or old_s != new_s or (old_ns != new_ns and old_ns and new_ns):
            return True
    return _capability(old_path) != _capability(new_path)
