"""What one node has for sandboxes, as seen from the node itself: its GPUs, memory, Docker, the
sandbox image, free disk where Docker keeps containers and where trials' workspaces go, the
directories a sweep mounts (mirrors, assets, wheelhouses), and how many of our trials run there.

No Ray here: `reb_ray.orchestrators.cluster_status` runs `check_node` on every node of a
cluster for `reb-ray cluster status`, and `reb_ray.orchestrators.node_check` runs it with a
sweep's requirements on every node at sweep start (and on each node that joins). Unknown is
None, never 0.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from reb_ray.models.sweep import ClusterSettings
from reb_ray.sandbox.ownership import MANAGED, OWNER_HOST, TRIAL


@dataclass(frozen=True)
class NodeHealth:
    """One node's check.

    `gpu_models`: one name per GPU nvidia-smi lists ([] without nvidia-smi, None when it failed).
    `docker`: None when the daemon answers, else the problem in one line. `image_present`: the
    sandbox image tag is in the daemon (None: unknown, no daemon). `free_disk_bytes`: free bytes
    on the file system of Docker's root directory (None: unknown). `running_trials`: running
    containers of ours whose owner process runs on this host (None: unknown). `memory_bytes`:
    the node's physical memory (MemTotal; None: unknown). `docker_checked`: False when the
    sweep's sandbox needs no Docker (then `docker` and `image_present` say nothing).
    """

    host: str
    gpu_models: list[str] | None
    docker: str | None
    image: str
    image_present: bool | None
    free_disk_bytes: int | None
    running_trials: int | None
    problems: list[str] = field(default_factory=list)
    memory_bytes: int | None = None
    docker_checked: bool = True

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


TRIAL_MIN_FREE_BYTES = ClusterSettings().min_free_bytes
"""Free bytes a node needs for trials unless a sweep says otherwise: the sweep's own default
(`[cluster] min_free_bytes`), so `reb-ray cluster status` fails a node exactly when a sweep's
preflight would. `reb-ray doctor`'s larger figure is advice (room for built environments), a
warning there, never a failed node."""


def check_node(image: str | None, docker_timeout_s: float = 10, *, min_free_bytes: int = TRIAL_MIN_FREE_BYTES,
               paths: Sequence[tuple[str, str]] = (), sandbox: str = "docker") -> NodeHealth:
    """Check this node for sandboxes of `image` (a tag; None: a sandbox without Docker, such as
    `local` or `sleep`). Never raises for a broken node: each problem becomes one line in
    `problems`: Docker unreachable, image missing, less than `min_free_bytes` free at Docker's
    root or in the temporary directory trials' workspaces use (the trial's own preflight rule,
    reb_ray.trial.run), a directory of `paths` ((what, path) pairs: "assets", "repo mirror", ...)
    missing or unreadable here. `sandbox` names the provider whose engine is asked (docker's
    daemon, or the podman service of `reb_ray.sandbox.docker.podman_sandbox`); its problems start with
    the engine's name and say what to configure."""
    host = socket.gethostname()
    gpus = gpu_models()
    problems = [] if gpus is not None else ["nvidia-smi failed"]
    problems += _path_problems(paths)
    memory = _memory_bytes()
    tmp = tempfile.gettempdir()
    free_tmp = _free_bytes(Path(tmp))
    if free_tmp is not None and free_tmp < min_free_bytes:
        problems.append(f"disk: {free_tmp / 1e9:.1f} GB free in {tmp}, trials need >= {min_free_bytes / 1e9:.1f} GB")
    if image is None:
        return NodeHealth(host, gpus, None, "", None, free_tmp, None, problems, memory, docker_checked=False)
    from reb_ray.sandbox import provider_class

    engine = provider_class(sandbox)
    try:
        client = engine.connect_engine(timeout=docker_timeout_s)
        root = client.info().get("DockerRootDir") or "/var/lib/docker"
        present = _image_present(client, image)
        trials = running_trials(client, host)
    except Exception as exc:  # noqa: BLE001 - RebRayError, docker's APIError, requests' errors: all the node's problem
        # one line, long enough for the engine's fix after a long socket path and reason
        message = " ".join(str(exc).split())[:600]
        return NodeHealth(host, gpus, message, image, None, None, None, [*problems, f"{engine.engine_name}: {message}"],
                          memory)
    if not present:
        problems.append(_image_problem(engine, image))
    free = _free_bytes(Path(root))
    if free is not None and free < min_free_bytes:
        problems.append(f"disk: {free / 1e9:.1f} GB free, sandboxes need >= {min_free_bytes / 1e9:.1f} GB")
    return NodeHealth(host, gpus, None, image, present, free, trials, problems, memory)


def _image_problem(engine, image: str) -> str:
    """The node check's line for a missing image, with the fix for the provider's engine."""
    return f"image {image} missing ({engine.image_fix(image)})"


def _path_problems(paths: Sequence[tuple[str, str]]) -> list[str]:
    """One line per directory of `paths` that this node lacks or cannot read."""
    import os

    problems = []
    for what, path in paths:
        if not os.path.isdir(path):
            problems.append(f"{what} {path}: no such directory on this node")
        elif not os.access(path, os.R_OK | os.X_OK):
            problems.append(f"{what} {path}: not readable on this node")
    return problems


def _memory_bytes() -> int | None:
    """MemTotal of /proc/meminfo in bytes; None when unreadable."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


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
