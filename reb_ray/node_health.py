"""What one node has for sandboxes, as seen from the node itself: its GPUs, Docker, the sandbox
image, free disk where Docker keeps containers, and how many of our trials run there.

No Ray here: `reb_ray/orchestrators/cluster_status.py` runs `check_node` on every node of a
cluster; `reb-ray cluster status` prints the result. Unknown is None, never 0.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from reb_ray.doctor import MIN_FREE_BYTES
from reb_ray.sandbox.ownership import MANAGED, OWNER_HOST, TRIAL


@dataclass(frozen=True)
class NodeHealth:
    """One node's check.

    `gpu_models`: one name per GPU nvidia-smi lists ([] without nvidia-smi, None when it failed).
    `docker`: None when the daemon answers, else the problem in one line. `image_present`: the
    sandbox image tag is in the daemon (None: unknown, no daemon). `free_disk_bytes`: free bytes
    on the file system of Docker's root directory (None: unknown). `running_trials`: running
    containers of ours whose owner process runs on this host (None: unknown).
    """

    host: str
    gpu_models: list[str] | None
    docker: str | None
    image: str
    image_present: bool | None
    free_disk_bytes: int | None
    running_trials: int | None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the node can take trials (the problems list is empty)."""
        return not self.problems


def gpu_models(timeout_s: float = 30) -> list[str] | None:
    """Names of this node's GPUs in nvidia-smi's order; [] without nvidia-smi; None if it failed."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        proc = subprocess.run([smi, "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True,
                              timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    return [line.strip() for line in proc.stdout.splitlines() if line.strip()]


def running_trials(client, host: str) -> int:
    """Running containers labelled as our trials whose owner ran on `host` (one removed while
    listed is not counted)."""
    labels = [f"{MANAGED}=true", TRIAL, f"{OWNER_HOST}={host}"]
    return len(client.containers.list(ignore_removed=True, filters={"label": labels, "status": "running"}))


def check_node(image: str, docker_timeout_s: float = 10) -> NodeHealth:
    """Check this node for sandboxes of `image` (a tag). Never raises for a broken node: each
    problem becomes one line in `problems` (Docker unreachable, image missing, less free disk
    than `reb_ray.doctor.MIN_FREE_BYTES`)."""
    from reb_ray.sandbox.docker_client import connect

    host = socket.gethostname()
    gpus = gpu_models()
    problems = [] if gpus is not None else ["nvidia-smi failed"]
    try:
        client = connect(timeout=docker_timeout_s)
        root = client.info().get("DockerRootDir") or "/var/lib/docker"
        present = _image_present(client, image)
        trials = running_trials(client, host)
    except Exception as exc:  # noqa: BLE001 - RebRayError, docker's APIError, requests' errors: all the node's problem
        message = " ".join(str(exc).split())[:160]
        return NodeHealth(host, gpus, message, image, None, None, None, [*problems, f"docker: {message}"])
    if not present:
        problems.append(f"image {image} missing (reb-ray image build)")
    free = _free_bytes(Path(root))
    if free is not None and free < MIN_FREE_BYTES:
        problems.append(f"disk: {free / 1e9:.1f} GB free, sandboxes need >= {MIN_FREE_BYTES / 1e9:.0f} GB")
    return NodeHealth(host, gpus, None, image, present, free, trials, problems)


def _image_present(client, image: str) -> bool:
    from docker.errors import ImageNotFound

    try:
        client.images.get(image)
        return True
    except ImageNotFound:
        return False


def _free_bytes(path: Path) -> int | None:
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None
