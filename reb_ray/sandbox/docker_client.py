"""Connecting to the Docker daemon with a one-line error that says how to fix it."""

from __future__ import annotations

import os
import threading

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


_SHARED: dict[str, docker.DockerClient] = {}
_SHARED_LOCK = threading.Lock()


def shared_client() -> docker.DockerClient:
    """This process's client of the daemon DOCKER_HOST names, made by `connect` on first use and
    then reused: a slot worker runs many trials, and each would otherwise open and ping its own
    (issue 12, item 2). A daemon that restarted is reached again on the next request (the
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
