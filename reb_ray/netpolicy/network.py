"""The node's Docker network for `registries` sandboxes, and the proxy settings they get.

`reb-ray-registries` is a bridge network created with `--internal`: Docker gives it no way out
(its isolation rules drop every packet from it to an address outside its subnet, and its
embedded DNS resolves no outside name), so a connection that bypasses the egress proxy fails
inside the sandbox. Its gateway is the node's own address on that bridge; the trial's egress
proxy and the node's LLM proxy listen there. Inter-container traffic is off
(`enable_icc=false`): one trial's sandbox cannot reach another's. Its bridge interface has a
fixed name, BRIDGE_NAME, which the host guard's iptables rules match (hostguard.py: `--internal`
stops forwarding only, not packets to the node itself). IPv6 is off (Docker's default).

The network is made once per node (a file lock keeps two trials on one node from making two of
the same name) and kept: it costs nothing without containers, and other sweeps may be using it.
One made by an older reb-ray (no fixed bridge name) is made again when no container uses it;
while one does, the attempt fails with a one-line error naming it.
"""

from __future__ import annotations

import fcntl
import tempfile
from pathlib import Path

from docker.errors import APIError, DockerException, NotFound

from reb_ray.errors import DockerUnavailable, InfraError
from reb_ray.netpolicy.hostguard import CATEGORY as GUARD_CATEGORY

NETWORK_NAME = "reb-ray-registries"
NETWORK_LABELS = {"reb-ray.network": "registries"}
#: The network's bridge interface on the node (at most 15 characters, Linux's IFNAMSIZ - 1).
BRIDGE_NAME = "rebray-reg0"
_BRIDGE_OPTION = "com.docker.network.bridge.name"
_OPTIONS = {"com.docker.network.bridge.enable_icc": "false", _BRIDGE_OPTION: BRIDGE_NAME}
#: The variables a sandbox's tools read their proxy from (pip, apt, conda, npm, git, curl, Python
#: urllib/requests/httpx, Node CLIs), both spellings.
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")
NO_PROXY_VARS = ("NO_PROXY", "no_proxy")


def ensure_network(client) -> str:
    """Creates NETWORK_NAME on this node's daemon if missing; returns its gateway (the node's
    address on it, where the proxies listen). Raises DockerUnavailable (one line) when the
    daemon cannot make it or it has no IPv4 gateway, or a network of that name is not ours;
    InfraError (the host guard's category) when an older one without BRIDGE_NAME is in use."""
    lock_path = Path(tempfile.gettempdir()) / "reb-ray-registries-network.lock"
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            network = _get_or_create(client)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    attrs = network.attrs
    if not attrs.get("Internal") or (attrs.get("Labels") or {}).get("reb-ray.network") != "registries":
        raise DockerUnavailable(f"Docker network {NETWORK_NAME!r} exists but is not reb-ray's internal network; "
                                f"remove it (`docker network rm {NETWORK_NAME}`)")
    for config in attrs.get("IPAM", {}).get("Config") or []:
        if config.get("Gateway") and ":" not in config["Gateway"]:
            return config["Gateway"].split("/")[0]
    raise DockerUnavailable(f"Docker network {NETWORK_NAME!r} has no IPv4 gateway")


def _get_or_create(client):
    try:
        network = client.networks.get(NETWORK_NAME)
        if _current(network.attrs):
            return network
        _remove_old(network)
    except NotFound:
        pass
    except DockerException as exc:
        raise DockerUnavailable(f"Docker network {NETWORK_NAME!r}: {str(exc).splitlines()[0][:200]}") from None
    try:
        network = client.networks.create(NETWORK_NAME, driver="bridge", internal=True, check_duplicate=True,
                                         labels=NETWORK_LABELS, options=_OPTIONS)
        network.reload()
        return network
    except APIError as exc:
        if "already exists" in str(exc):  # made by another node-local process without our lock
            return client.networks.get(NETWORK_NAME)
        raise DockerUnavailable(f"cannot create Docker network {NETWORK_NAME!r}: {str(exc).splitlines()[0][:200]}") from None


def _current(attrs: dict) -> bool:
    """Whether the network is made as this module makes it (bridge name, no IPv6); one that is
    not ours at all is left for ensure_network's own error."""
    ours = attrs.get("Internal") and (attrs.get("Labels") or {}).get("reb-ray.network") == "registries"
    return not ours or ((attrs.get("Options") or {}).get(_BRIDGE_OPTION) == BRIDGE_NAME and not attrs.get("EnableIPv6"))


def _remove_old(network) -> None:
    """Removes our network made without the fixed bridge name (or with IPv6), so that it is made
    again with it. Raises InfraError when containers still use it."""
    users = len(network.attrs.get("Containers") or {})
    try:
        if not users:
            network.remove()
            return
    except NotFound:
        return
    except APIError as exc:
        if "active endpoints" not in str(exc):
            raise
    raise InfraError(GUARD_CATEGORY, f"Docker network {NETWORK_NAME!r} was made without bridge name {BRIDGE_NAME!r} "
                                     f"(an older reb-ray) and is in use; `docker network rm {NETWORK_NAME}` once its "
                                     "containers are gone, so that the host guard can cover it")


def proxy_env(proxy_url: str, gateway: str) -> dict[str, str]:
    """The sandbox's environment for its egress proxy: every tool's proxy variable at
    `proxy_url`, and the node's own address (the LLM proxy) and loopback left direct."""
    no_proxy = ",".join(("localhost", "127.0.0.1", "::1", gateway))
    return {**dict.fromkeys(PROXY_VARS, proxy_url), **dict.fromkeys(NO_PROXY_VARS, no_proxy)}

