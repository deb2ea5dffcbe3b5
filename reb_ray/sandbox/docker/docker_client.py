"""Connecting to the Docker daemon with a one-line error that says how to fix it."""

from __future__ import annotations

import os
import threading
from contextlib import closing

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


#: Seconds a trial waits for a Docker daemon that does not answer (one that restarts) before its
#: attempt fails as infra_daemon; the in-flight attempts of a restart are retried at once, and
#: their retries wait here, so they run once the daemon answers instead of failing too.
DAEMON_WAIT_S = 90.0


def wait_for_daemon(timeout_s: float = DAEMON_WAIT_S) -> None:
    """Return as soon as the daemon DOCKER_HOST names answers a ping on a new connection (about
    10 ms when it is up); raises InfraError `infra_daemon` when it has not answered for
    `timeout_s` seconds. A new connection, not a pooled one: a daemon that is shutting down
    still answers on its open connections after it stopped accepting new ones."""
    import time

    import requests

    from reb_ray.errors import InfraError

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with closing(docker.from_env(timeout=10)) as client:
                client.ping()
            return
        except (DockerException, requests.exceptions.RequestException) as exc:
            if time.monotonic() >= deadline:
                reason = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
                raise InfraError("infra_daemon", f"Docker daemon did not answer for {timeout_s:g} s ({reason})") from None
        time.sleep(0.5)


_SHARED: dict[str, docker.DockerClient] = {}
_SHARED_LOCK = threading.Lock()


def shared_client() -> docker.DockerClient:
    """This process's client of the daemon DOCKER_HOST names, made by `connect` on first use and
    then reused: a slot worker runs many trials, and each would otherwise open and ping its own
    (a round trip per trial). A daemon that restarted is reached again on the next request (the
    client's connection pool reconnects). Raises DockerUnavailable on first use without a daemon.
    """
    key = os.environ.get("DOCKER_HOST", "")
    with _SHARED_LOCK:
        if key not in _SHARED:
            _SHARED[key] = connect()
        return _SHARED[key]


def network_gateway(client: docker.DockerClient, network: str) -> str | None:
    """The host's address on Docker network `network`, where its containers reach services of
    the node (the LLM proxy): the network's IPAM gateway, else the first host address of its
    subnet (Docker's default bridge often lists only the subnet: 172.17.0.0/16 -> 172.17.0.1).

    `host` gives 127.0.0.1 (the container shares the node's loopback); `none` gives None (no
    way out). Raises DockerUnavailable when the daemon does not answer or the network does not
    exist.
    """
    import ipaddress

    if network == "host":
        return "127.0.0.1"
    if network == "none":
        return None
    try:
        configs = client.networks.get(network).attrs.get("IPAM", {}).get("Config") or []
    except DockerException as exc:
        raise DockerUnavailable(f"Docker network {network!r}: {str(exc).splitlines()[0][:160]}") from None
    for config in configs:
        if config.get("Gateway"):
            return config["Gateway"]
        subnet = config.get("Subnet")
        if subnet and ipaddress.ip_network(subnet).version == 4:
            return str(next(ipaddress.ip_network(subnet).hosts()))
    raise DockerUnavailable(f"Docker network {network!r} has no IPv4 gateway or subnet for the node's LLM proxy")


def labelled_images(client: docker.DockerClient, labels: list[str], only: set[str] | None = None) -> list:
    """The images carrying every one of `labels` ("key=value" or "key"), as image objects (to
    the ids in `only` when given). Listed, then fetched one by one: on a daemon shared by
    several sweeps an image can be removed between the two (another sweep's reaper or
    attempt close, its disk budget, `env gc`); such an image is simply gone, never an error for
    the whole list, as the SDK's `images.list` (which inspects every listed image) makes it."""
    found = []
    for listed in client.api.images(filters={"label": labels}):
        if only is not None and listed["Id"] not in only:
            continue
        try:
            found.append(client.images.get(listed["Id"]))
        except docker.errors.ImageNotFound:
            continue
    return found
