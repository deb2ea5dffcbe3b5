"""Where sandboxes reach services of the node: the Docker network's gateway (real daemon)."""

from __future__ import annotations

import ipaddress

import pytest

from reb_ray.errors import DockerUnavailable
from reb_ray.sandbox.docker_client import network_gateway

pytestmark = pytest.mark.docker


def test_the_gateway_of_each_network_kind(docker_client):
    bridge = network_gateway(docker_client, "bridge")
    assert ipaddress.ip_address(bridge).version == 4
    subnet = docker_client.networks.get("bridge").attrs["IPAM"]["Config"][0]["Subnet"]
    assert ipaddress.ip_address(bridge) in ipaddress.ip_network(subnet)  # e.g. 172.17.0.1 in 172.17.0.0/16
    assert network_gateway(docker_client, "host") == "127.0.0.1"
    assert network_gateway(docker_client, "none") is None
    with pytest.raises(DockerUnavailable, match="no-such-network-x"):
        network_gateway(docker_client, "no-such-network-x")
