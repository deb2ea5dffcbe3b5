"""Connecting to the Docker daemon with a one-line error that says how to fix it."""

from __future__ import annotations

import docker
from docker.errors import DockerException

from reb_ray.errors import DockerUnavailable

HOW_TO_START = (
    "start it with `dockerd > /var/log/dockerd.log 2>&1 &` (or `systemctl start docker`), "
    "or run trusted built-in agents with `--sandbox local`"
)


def connect(timeout: float = 120.0) -> docker.DockerClient:
    """A client for the daemon named by DOCKER_HOST (default the local socket), pinged once.

    `timeout` is the per-request timeout in seconds. Raises DockerUnavailable when the daemon
    does not answer.
    """
    try:
        client = docker.from_env(timeout=int(timeout))
        client.ping()
    except DockerException as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DockerUnavailable(f"Docker daemon not reachable ({reason[:160]}): {HOW_TO_START}") from None
    return client
