"""Where sandboxes reach services of the node: the Docker network's gateway (real daemon)."""

from __future__ import annotations

import ipaddress

import pytest

from reb_ray.errors import DockerUnavailable
from reb_ray.sandbox.docker.docker_client import network_gateway

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


def test_sandboxes_of_one_process_share_one_client_and_a_missing_image_is_never_pulled(sandbox_image):
    """Issue 12, item 2: a slot worker runs many trials on one Docker client; and with no image
    lookup per sandbox, a missing image is still ImageMissing at once (create, never a pull)."""
    from reb_ray.errors import ImageMissing
    from reb_ray.sandbox import SandboxConfig
    from reb_ray.sandbox.docker.docker_sandbox import DockerSandbox

    with DockerSandbox(SandboxConfig(image=sandbox_image, sweep_id="test", trial_id="shared-a")) as a, \
            DockerSandbox(SandboxConfig(image=sandbox_image, sweep_id="test", trial_id="shared-b")) as b:
        assert a.client is b.client
        assert a.exec("echo a").output.strip() == "a" and b.exec("echo b").output.strip() == "b"
    with pytest.raises(ImageMissing, match="reb-ray image build"):
        DockerSandbox(SandboxConfig(image="reb-ray/sandbox:never-built-here", sweep_id="test", trial_id="missing"))


def test_wait_for_daemon_is_bounded_and_names_the_category(monkeypatch, tmp_path):
    """F20: an attempt waits for a daemon that does not answer, at most its bound, then fails
    as infra_daemon (retried), never as the agent's or a harness bug."""
    import time

    from reb_ray.errors import InfraError
    from reb_ray.sandbox.docker.docker_client import wait_for_daemon

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'no-daemon.sock'}")
    started = time.monotonic()
    with pytest.raises(InfraError) as err:
        wait_for_daemon(timeout_s=1.0)
    assert err.value.category == "infra_daemon" and "did not answer for 1 s" in str(err.value)
    assert 1.0 <= time.monotonic() - started < 5.0


def test_wait_for_daemon_returns_at_once_when_it_answers(docker_client):
    import time

    from reb_ray.sandbox.docker.docker_client import wait_for_daemon

    started = time.monotonic()
    wait_for_daemon(timeout_s=5.0)
    assert time.monotonic() - started < 2.0
