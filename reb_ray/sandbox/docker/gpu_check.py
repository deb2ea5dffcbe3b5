"""Can this node's Docker give a container GPUs?

A GPU a container cannot get makes every GPU trial fail at container start, on every attempt
and every resume. So before any trial, each node with GPUs starts one tiny container from the
sandbox image with a device request for all GPUs (what `docker run --gpus all` asks), which
works only through the NVIDIA runtime, its prestart hook, or CDI. `docker info` alone is not
enough: `--gpus` can work with no `nvidia` runtime listed (the hook), and a listed runtime can
still fail (no driver loaded). Where it fails, the node's GPU stages are
`insufficient_hardware` (owner hardware, never retried) and its trials run without GPUs.
"""

from __future__ import annotations

import uuid

import docker
from docker.errors import DockerException, ImageNotFound, NotFound
from docker.types import DeviceRequest

from reb_ray.sandbox.ownership import container_labels

#: The one-line fix `reb-ray doctor` prints, and every `insufficient_hardware` reason it causes.
NVIDIA_TOOLKIT_FIX = (
    "install the NVIDIA Container Toolkit (https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/"
    "latest/install-guide.html), then `sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker`"
)


def docker_gpu_problem(client: docker.DockerClient, image: str | None, timeout_s: float = 60.0) -> str | None:
    """None when a container from `image` can be given the node's GPUs, else why not (one line).

    The probe container runs `true` with a device request for all GPUs, carries our labels (the
    reaper takes it if this process dies) and is removed before returning. Without `image` on
    the node, `docker info` decides: a listed `nvidia` runtime or CDI spec directory counts as
    able. Never raises for Docker errors (they become the reason).
    """
    try:
        info = client.info()
    except DockerException as exc:
        return f"Docker did not answer `info`: {_daemon_line(exc)}"
    runtimes = ", ".join(sorted(info.get("Runtimes") or {})) or "none"
    try:
        if image is None:
            raise ImageNotFound("no image")
        client.images.get(image)
    except ImageNotFound:
        if "nvidia" in (info.get("Runtimes") or {}) or info.get("CDISpecDirs"):
            return None
        return f"this node's Docker has no NVIDIA runtime or CDI (runtimes: {runtimes})"
    name = f"reb-ray-gpu-check-{uuid.uuid4().hex[:12]}"
    try:
        container = client.containers.create(
            image, ["true"], name=name, network_mode="none",
            labels=container_labels("gpu-check", name, 0), device_requests=[DeviceRequest(count=-1, capabilities=[["gpu"]])],
        )
        container.start()
        code = container.wait(timeout=timeout_s).get("StatusCode")
        return None if code == 0 else f"a GPU container on this node exited {code} (runtimes: {runtimes})"
    except DockerException as exc:
        return f"this node's Docker cannot give containers GPUs: {_daemon_line(exc)[:240]} (runtimes: {runtimes})"
    except Exception as exc:  # noqa: BLE001 - a timeout of the wait (requests' ReadTimeout)
        return f"the GPU probe container did not finish: {type(exc).__name__} (runtimes: {runtimes})"
    finally:
        try:
            client.containers.get(name).remove(force=True, v=True)
        except (NotFound, DockerException):
            pass


def _daemon_line(exc: BaseException) -> str:
    """The first line of what the Docker daemon said (an API error's `explanation`, the daemon's
    own words, rather than the HTTP status and URL its text leads with), else of `exc`'s text.
    Not `reb_ray.errors.first_line`: that one reads only the exception's text."""
    explanation = getattr(exc, "explanation", None)
    text = str(explanation or exc) or type(exc).__name__
    return text.splitlines()[0]
