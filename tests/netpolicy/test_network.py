"""The node's internal network on the real daemon: its fixed bridge name, and one made by an
older reb-ray (without it) made again, or refused in one line while a container uses it."""

from __future__ import annotations

import subprocess

import pytest

from reb_ray.errors import InfraError
from reb_ray.netpolicy.network import BRIDGE_NAME, NETWORK_LABELS, NETWORK_NAME, ensure_network

pytestmark = pytest.mark.docker


def _old_network(client):
    """NETWORK_NAME as reb-ray made it before the host guard: no bridge name."""
    try:
        client.networks.get(NETWORK_NAME).remove()  # fails while another trial uses it: rerun then
    except Exception as exc:  # noqa: BLE001
        if "not found" not in str(exc).lower():
            raise
    return client.networks.create(NETWORK_NAME, driver="bridge", internal=True, labels=NETWORK_LABELS,
                                  options={"com.docker.network.bridge.enable_icc": "false"})


def _bridge_of(client) -> str | None:
    return (client.networks.get(NETWORK_NAME).attrs.get("Options") or {}).get("com.docker.network.bridge.name")


def test_an_old_network_is_made_again_with_the_bridge_name_when_unused(docker_client):
    old = _old_network(docker_client)
    assert _bridge_of(docker_client) is None
    gateway = ensure_network(docker_client)
    network = docker_client.networks.get(NETWORK_NAME)
    assert network.id != old.id and _bridge_of(docker_client) == BRIDGE_NAME
    assert gateway == network.attrs["IPAM"]["Config"][0]["Gateway"]
    assert subprocess.run(["ip", "link", "show", BRIDGE_NAME], capture_output=True).returncode == 0
    assert ensure_network(docker_client) == gateway and docker_client.networks.get(NETWORK_NAME).id == network.id


def test_an_old_network_in_use_is_refused_in_one_line_and_made_again_after(docker_client, sandbox_image):
    old = _old_network(docker_client)
    box = docker_client.containers.run(sandbox_image, ["sleep", "120"], detach=True, network=NETWORK_NAME,
                                       labels={"reb-ray.managed": "true"})
    try:
        with pytest.raises(InfraError) as err:
            ensure_network(docker_client)
        assert err.value.category == "infra_network_guard" and "\n" not in str(err.value)
        assert f"{NETWORK_NAME!r} was made without bridge name {BRIDGE_NAME!r}" in str(err.value)
        assert docker_client.networks.get(NETWORK_NAME).id == old.id  # left to its container
    finally:
        box.remove(force=True)
    ensure_network(docker_client)
    assert _bridge_of(docker_client) == BRIDGE_NAME
