"""The node's Docker networks for docker sandboxes, one per network policy, and the proxy
settings `registries` sandboxes get.

Both are bridge networks reb-ray makes and keeps (they cost nothing without containers, and
other sweeps may be using them), each with inter-container traffic off (`enable_icc=false`:
one trial's sandbox cannot reach another's), IPv6 off (Docker's default) and a fixed bridge
interface name, which the host guard's iptables rules match (hostguard.py: Docker's rules
filter forwarded packets only, never packets to the node itself):

- REGISTRIES, `reb-ray-registries` on `rebray-reg0`, created `--internal`: Docker gives it no
  way out (its isolation rules drop every packet from it to an address outside its subnet,
  and its embedded DNS resolves no outside name), so a connection that bypasses the trial's
  egress proxy fails inside the sandbox.
- OPEN, `reb-ray-open` on `rebray-open0`, not internal: forwarding and NAT to the outside
  are Docker's usual (research repositories fetch from many hosts); only the node's own
  services are closed to it, by the host guard. Docker's default bridge (docker0) is left to
  every other container of the node.

Each network's gateway is the node's own address on its bridge; the proxies a sandbox may use
(its egress proxy under `registries`, the node's LLM proxy) listen there.

A network is made once per node (a file lock keeps two trials on one node from making two of
the same name). One made by an older reb-ray (no fixed bridge name) is made again when no
container uses it; while one does, the attempt fails with a one-line error naming it.
"""

from __future__ import annotations

import fcntl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from docker.errors import APIError, DockerException, NotFound

from reb_ray.errors import DockerUnavailable, InfraError
from reb_ray.netpolicy.hostguard import CATEGORY as GUARD_CATEGORY

_BRIDGE_OPTION = "com.docker.network.bridge.name"
_ICC_OPTION = "com.docker.network.bridge.enable_icc"
_LABEL = "reb-ray.network"


@dataclass(frozen=True)
class SandboxNetwork:
    """One of reb-ray's sandbox networks: its Docker `name`, its bridge interface `bridge` on
    the node (at most 15 characters, Linux's IFNAMSIZ - 1), whether it is `internal` (no
    forwarding out), the host guard's iptables `chain` for it, and its `policy` (the
    `reb-ray.network` label)."""

    name: str
    bridge: str
    internal: bool
    chain: str
    policy: str

    @property
    def labels(self) -> dict[str, str]:
        return {_LABEL: self.policy}

    @property
    def options(self) -> dict[str, str]:
        return {_ICC_OPTION: "false", _BRIDGE_OPTION: self.bridge}


REGISTRIES = SandboxNetwork("reb-ray-registries", "rebray-reg0", internal=True, chain="REB-RAY-SANDBOX-IN",
                            policy="registries")
OPEN = SandboxNetwork("reb-ray-open", "rebray-open0", internal=False, chain="REB-RAY-OPEN-IN", policy="open")
NETWORKS = (REGISTRIES, OPEN)
#: The variables a sandbox's tools read their proxy from (pip, apt, conda, npm, git, curl, Python
#: urllib/requests/httpx, Node CLIs), both spellings.
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")
NO_PROXY_VARS = ("NO_PROXY", "no_proxy")


def by_name(name: str) -> SandboxNetwork | None:
    """The reb-ray network of Docker name `name`, or None for any other network."""
    return next((net for net in NETWORKS if net.name == name), None)


def ensure_network(client, net: SandboxNetwork = REGISTRIES) -> str:
    """Creates `net` on this node's daemon if missing; returns its gateway (the node's address
    on it, where the proxies listen). Raises DockerUnavailable (one line) when the daemon
    cannot make it or it has no IPv4 gateway, or a network of that name is not ours;
    InfraError (the host guard's category) when an older one without its bridge name is in use."""
    lock_path = Path(tempfile.gettempdir()) / f"{net.name}-network.lock"
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            network = _get_or_create(client, net)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    attrs = network.attrs
    if not _ours(attrs, net):
        kind = "internal network" if net.internal else f"{net.policy!r} network"
        raise DockerUnavailable(f"Docker network {net.name!r} exists but is not reb-ray's {kind}; "
                                f"remove it (`docker network rm {net.name}`)")
    for config in attrs.get("IPAM", {}).get("Config") or []:
        if config.get("Gateway") and ":" not in config["Gateway"]:
            return config["Gateway"].split("/")[0]
    raise DockerUnavailable(f"Docker network {net.name!r} has no IPv4 gateway")


def _get_or_create(client, net: SandboxNetwork):
    try:
        network = client.networks.get(net.name)
        if _current(network.attrs, net):
            return network
        _remove_old(network, net)
    except NotFound:
        pass
    except DockerException as exc:
        raise DockerUnavailable(f"Docker network {net.name!r}: {str(exc).splitlines()[0][:200]}") from None
    try:
        network = client.networks.create(net.name, driver="bridge", internal=net.internal, check_duplicate=True,
                                         labels=net.labels, options=net.options)
        network.reload()
        return network
    except APIError as exc:
        if "already exists" in str(exc):  # made by another node-local process without our lock
            return client.networks.get(net.name)
        raise DockerUnavailable(f"cannot create Docker network {net.name!r}: {str(exc).splitlines()[0][:200]}") from None


def _ours(attrs: dict, net: SandboxNetwork) -> bool:
    return bool(attrs.get("Internal")) == net.internal and (attrs.get("Labels") or {}).get(_LABEL) == net.policy


def _current(attrs: dict, net: SandboxNetwork) -> bool:
    """Whether the network is made as this module makes it (bridge name, icc off, no IPv6);
    one that is not ours at all is left for ensure_network's own error."""
    options = attrs.get("Options") or {}
    return not _ours(attrs, net) or (options.get(_BRIDGE_OPTION) == net.bridge and options.get(_ICC_OPTION) == "false"
                                     and not attrs.get("EnableIPv6"))


def _remove_old(network, net: SandboxNetwork) -> None:
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
    raise InfraError(GUARD_CATEGORY, f"Docker network {net.name!r} was made without bridge name {net.bridge!r} "
                                     f"(an older reb-ray) and is in use; `docker network rm {net.name}` once its "
                                     "containers are gone, so that the host guard can cover it")


def proxy_env(proxy_url: str, gateway: str) -> dict[str, str]:
    """The sandbox's environment for its egress proxy: every tool's proxy variable at
    `proxy_url`, and the node's own address (the LLM proxy) and loopback left direct."""
    no_proxy = ",".join(("localhost", "127.0.0.1", "::1", gateway))
    return {**dict.fromkeys(PROXY_VARS, proxy_url), **dict.fromkeys(NO_PROXY_VARS, no_proxy)}
