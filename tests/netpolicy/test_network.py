"""The node's sandbox networks on the real daemon: their fixed bridge names, one made by an
older reb-ray (without it) made again, or refused in one line while a container uses it, and
the open network's forwarding."""

from __future__ import annotations

import subprocess

import pytest

from reb_ray.errors import DockerUnavailable, InfraError
from reb_ray.netpolicy.network import OPEN, REGISTRIES, ensure_network

pytestmark = pytest.mark.docker


def _old_network(client):
    """REGISTRIES.name as reb-ray made it before the host guard: no bridge name."""
    try:
        client.networks.get(REGISTRIES.name).remove()  # fails while another trial uses it: rerun then
    except Exception as exc:  # noqa: BLE001
        if "not found" not in str(exc).lower():
            raise
    return client.networks.create(REGISTRIES.name, driver="bridge", internal=True, labels=REGISTRIES.labels,
                                  options={"com.docker.network.bridge.enable_icc": "false"})


def _bridge_of(client) -> str | None:
    return (client.networks.get(REGISTRIES.name).attrs.get("Options") or {}).get("com.docker.network.bridge.name")


def test_an_old_network_is_made_again_with_the_bridge_name_when_unused(docker_client):
    old = _old_network(docker_client)
    assert _bridge_of(docker_client) is None
    gateway = ensure_network(docker_client)
    network = docker_client.networks.get(REGISTRIES.name)
    assert network.id != old.id and _bridge_of(docker_client) == REGISTRIES.bridge
    assert gateway == network.attrs["IPAM"]["Config"][0]["Gateway"]
    assert subprocess.run(["ip", "link", "show", REGISTRIES.bridge], capture_output=True).returncode == 0
    assert ensure_network(docker_client) == gateway and docker_client.networks.get(REGISTRIES.name).id == network.id


def test_an_old_network_in_use_is_refused_in_one_line_and_made_again_after(docker_client, sandbox_image):
    old = _old_network(docker_client)
    box = docker_client.containers.run(sandbox_image, ["sleep", "120"], detach=True, network=REGISTRIES.name,
                                       labels={"reb-ray.managed": "true"})
    try:
        with pytest.raises(InfraError) as err:
            ensure_network(docker_client)
        assert err.value.category == "infra_network_guard" and "\n" not in str(err.value)
        assert f"{REGISTRIES.name!r} was made without bridge name {REGISTRIES.bridge!r}" in str(err.value)
        assert docker_client.networks.get(REGISTRIES.name).id == old.id  # left to its container
    finally:
        box.remove(force=True)
    ensure_network(docker_client)
    assert _bridge_of(docker_client) == REGISTRIES.bridge


def test_the_open_network_forwards_out_has_its_bridge_name_and_no_traffic_between_containers(docker_client):
    gateway = ensure_network(docker_client, OPEN)
    attrs = docker_client.networks.get(OPEN.name).attrs
    assert attrs["Internal"] is False and attrs["Labels"] == {"reb-ray.network": "open"} and not attrs["EnableIPv6"]
    assert attrs["Options"] == {"com.docker.network.bridge.enable_icc": "false",
                                "com.docker.network.bridge.name": OPEN.bridge}
    assert gateway == attrs["IPAM"]["Config"][0]["Gateway"]
    assert ensure_network(docker_client, OPEN) == gateway and docker_client.networks.get(OPEN.name).id == attrs["Id"]
    assert subprocess.run(["ip", "link", "show", OPEN.bridge], capture_output=True).returncode == 0
    # Not Docker's default bridge: the other containers of the node stay where they are.
    assert OPEN.bridge != "docker0" and gateway != docker_client.networks.get("bridge").attrs["IPAM"]["Config"][0].get("Gateway")


def test_a_foreign_network_of_the_open_name_is_refused_in_one_line(docker_client):
    try:
        docker_client.networks.get(OPEN.name).remove()  # fails while a trial uses it: rerun then
    except Exception as exc:  # noqa: BLE001
        if "not found" not in str(exc).lower():
            raise
    foreign = docker_client.networks.create(OPEN.name, driver="bridge")  # someone else's, no label
    try:
        with pytest.raises(DockerUnavailable) as err:
            ensure_network(docker_client, OPEN)
        assert f"{OPEN.name!r} exists but is not reb-ray's" in str(err.value) and "\n" not in str(err.value)
    finally:
        foreign.remove()
    ensure_network(docker_client, OPEN)
