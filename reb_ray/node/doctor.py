"""`reb-ray doctor`: what this node has, and one line with the fix for each problem."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from reb_ray.errors import RebRayError

MIN_FREE_BYTES = 20 * 1024**3


@dataclass
class Check:
    """One doctor line. `level` is "ok", "warn" (works, degraded) or "fail" (cannot run)."""

    name: str
    level: str
    detail: str
    fix: str = ""


def check_docker_and_image(profile: str) -> list[Check]:
    """Docker daemon, NVIDIA runtime and the sandbox image for `profile`."""
    from reb_ray.sandbox.docker_client import connect
    from reb_ray.sandbox.image import image_tag, require_image

    try:
        client = connect(timeout=10)
    except RebRayError as exc:
        return [Check("docker", "fail", "daemon not reachable", str(exc).split(": ", 1)[-1]),
                Check("sandbox image", "fail", f"{image_tag(profile)} (unknown: no daemon)",
                      f"start Docker, then `reb-ray image build --profile {profile}`")]
    info = client.info()
    checks = [Check("docker", "ok", f"server {info.get('ServerVersion')}, root {info.get('DockerRootDir')}")]
    tag: str | None = None
    try:
        tag = require_image(client, profile)
        size = client.images.get(tag).attrs.get("Size", 0)
        image_check = Check("sandbox image", "ok", f"{tag} ({size / 1e9:.2f} GB)")
    except RebRayError as exc:
        image_check = Check("sandbox image", "fail", "missing", str(exc).split(": ", 1)[-1])
    checks += [check_docker_gpus(client, tag), image_check]
    checks.append(check_disk("docker disk", Path(info.get("DockerRootDir") or "/var/lib/docker")))
    return checks


def check_docker_gpus(client, image: str | None) -> Check:
    """Whether Docker gives containers GPUs: a probe container with a GPU device request
    (reb_ray/sandbox/gpu_check.py), the same check each GPU node runs before a sweep's trials."""
    from reb_ray.sandbox.gpu_check import NVIDIA_TOOLKIT_FIX, docker_gpu_problem

    problem = docker_gpu_problem(client, image)
    if problem is None:
        return Check("nvidia runtime", "ok", "containers get GPUs (a probe container with `--gpus all` ran)")
    return Check("nvidia runtime", "warn", f"{problem}: C3 and C4 are insufficient_hardware here (C2 too, unless the environment has no framework or a CPU-only build: those are the agent's)",
                 NVIDIA_TOOLKIT_FIX)


def check_gpus() -> Check:
    """GPUs seen by nvidia-smi on this node."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return Check("gpus", "warn", "none (nvidia-smi not found): C3/C4 fail as insufficient_hardware (owner hardware); C2 too, unless the environment has no framework or a CPU-only build", "run GPU stages on a GPU node")
    proc = subprocess.run([smi, "--query-gpu=index,name,driver_version", "--format=csv,noheader"],
                          capture_output=True, text=True, timeout=30)
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    if proc.returncode != 0 or not lines:
        return Check("gpus", "warn", f"nvidia-smi failed: {(proc.stderr or proc.stdout).strip()[:120]}", "check the NVIDIA driver")
    return Check("gpus", "ok", f"{len(lines)}: " + "; ".join(lines))


def check_ray() -> Check:
    try:
        import ray
    except ImportError:
        return Check("ray", "fail", "not importable", "pip install 'ray[default]'")
    return Check("ray", "ok", f"ray {ray.__version__}")


def check_pyright() -> Check:
    """The pinned pyright with its bundled node, run offline."""
    import sys

    proc = subprocess.run([sys.executable, "-m", "pyright", "--version"], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        return Check("pyright", "fail", (proc.stderr or proc.stdout).strip()[:120], "pip install 'pyright[nodejs]'")
    return Check("pyright", "ok", proc.stdout.strip().splitlines()[-1])


def check_disk(name: str, path: Path) -> Check:
    while not path.exists():
        path = path.parent
    free = shutil.disk_usage(path).free
    level = "ok" if free >= MIN_FREE_BYTES else "warn"
    return Check(name, level, f"{free / 1e9:.1f} GB free at {path}",
                 "" if level == "ok" else f"free space: sandboxes need >= {MIN_FREE_BYTES / 1e9:.0f} GB")


def check_host_guard() -> Check:
    """Whether this node can install the host guard docker sandboxes need (reb_ray/netpolicy/
    hostguard.py): iptables present and usable (root). Reads the filter table only."""
    from reb_ray.errors import InfraError
    from reb_ray.netpolicy.hostguard import check_usable

    try:
        check_usable()
    except InfraError as exc:
        return Check("host guard", "fail", str(exc).removeprefix("infra_network_guard: ")[:200],
                     "run sweeps as root with iptables installed, or set `network = \"bridge\"` (unguarded, recorded)")
    return Check("host guard", "ok", "iptables usable: sandboxes are kept off this node's services")


def run_checks(profile: str) -> list[Check]:
    """All checks, in display order."""
    return [*check_docker_and_image(profile), check_host_guard(), check_gpus(), check_ray(), check_pyright(),
            check_disk("output disk", Path.cwd())]
