"""Docker-provider rules: labels, init, shm, privileges, limits, GPUs, CA bundle, errors."""

from __future__ import annotations

import os

import pytest

from reb_ray.errors import DockerUnavailable, ImageMissing, RebRayError
from reb_ray.sandbox import SandboxConfig
from reb_ray.sandbox.docker.docker_sandbox import DockerSandbox, container_create_kwargs
from reb_ray.sandbox.ownership import MANAGED, OWNER_PID, SWEEP, TRIAL, ATTEMPT

GiB = 1024**3


def test_container_is_labelled_unprivileged_with_init_and_big_shm(docker_client, sandbox_image):
    config = SandboxConfig(image=sandbox_image, sweep_id="sw1", trial_id="noop/t1/0", attempt=2,
                           cpus=1.5, memory_bytes=2 * GiB)
    with DockerSandbox(config, docker_client) as sb:
        attrs = docker_client.api.inspect_container(sb.id)
        labels = attrs["Config"]["Labels"]
        assert labels[MANAGED] == "true" and labels[SWEEP] == "sw1"
        assert labels[TRIAL] == "noop/t1/0" and labels[ATTEMPT] == "2"
        assert labels[OWNER_PID] == str(os.getpid())
        host = attrs["HostConfig"]
        assert host["Privileged"] is False
        assert host["ShmSize"] == 16 * GiB
        assert host["NanoCpus"] == 1_500_000_000 and host["Memory"] == 2 * GiB
        assert "tini" in sb.exec("cat /proc/1/cmdline").output
        shm = sb.exec("df -B1 /dev/shm | tail -1").output.split()
        assert int(shm[1]) == 16 * GiB


def test_shm_size_configurable_and_network_none(docker_client, sandbox_image):
    config = SandboxConfig(image=sandbox_image, shm_size_bytes=256 * 1024**2, network="none")
    with DockerSandbox(config, docker_client) as sb:
        assert int(sb.exec("df -B1 /dev/shm | tail -1").output.split()[1]) == 256 * 1024**2
        assert sb.exec("cat /sys/class/net/eth0/address").exit_code != 0  # no interface but lo


def test_host_cuda_visible_devices_is_never_forwarded(docker_client, sandbox_image, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    config = SandboxConfig(image=sandbox_image, env={"CUDA_VISIBLE_DEVICES": "3,5", "KEEP": "1"})
    with DockerSandbox(config, docker_client) as sb:
        out = sb.exec("env").output
        assert "CUDA_VISIBLE_DEVICES" not in out and "KEEP=1" in out


def test_gpu_ids_become_one_device_request():
    config = SandboxConfig(image="x", gpus=["2", "GPU-8f3c0e2a-1111-2222-3333-444455556666"])
    kwargs = container_create_kwargs(config, "n")
    (request,) = kwargs["device_requests"]
    assert request["DeviceIDs"] == ["2", "GPU-8f3c0e2a-1111-2222-3333-444455556666"]
    assert request["Capabilities"] == [["gpu"]]
    assert "device_requests" not in container_create_kwargs(SandboxConfig(image="x"), "n")


def test_gpu_request_without_nvidia_runtime_fails_cleanly(docker_client, sandbox_image):
    sweep = f"gpu-request-{os.getpid()}"
    with pytest.raises(RebRayError, match="cannot start sandbox"):
        DockerSandbox(SandboxConfig(image=sandbox_image, gpus=["0"], sweep_id=sweep), docker_client)
    assert docker_client.containers.list(all=True, ignore_removed=True, filters={"label": f"{SWEEP}={sweep}"}) == []


def test_ca_bundle_is_passed_in(docker_client, sandbox_image, tmp_path):
    bundle = tmp_path / "ca.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\nreb-ray-test\n-----END CERTIFICATE-----\n")
    with DockerSandbox(SandboxConfig(image=sandbox_image, ca_bundle=bundle), docker_client) as sb:
        assert "reb-ray-test" in sb.exec("cat $SSL_CERT_FILE").output
        assert sb.exec("echo $PIP_CERT").output.strip() == "/etc/ssl/certs/ca-certificates.crt"


def test_missing_image_is_one_line_with_the_fix(docker_client):
    with pytest.raises(ImageMissing) as err:
        DockerSandbox(SandboxConfig(image="reb-ray/sandbox:does-not-exist"), docker_client)
    assert "reb-ray image build" in str(err.value) and "\n" not in str(err.value)


def test_no_daemon_is_one_line_naming_local_fallback(monkeypatch):
    from reb_ray.sandbox.docker.docker_client import connect

    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(DockerUnavailable) as err:
        connect(timeout=5)
    message = str(err.value)
    assert "\n" not in message and "dockerd" in message and "--sandbox local" in message


def test_exec_in_a_removed_sandbox_is_an_error(docker_client, sandbox_image):
    sb = DockerSandbox(SandboxConfig(image=sandbox_image), docker_client)
    docker_client.api.remove_container(sb.id, force=True)
    with pytest.raises(RebRayError):
        sb.exec("true")
    sb.close()


def test_size_falls_back_to_upperdir_walk(docker_client, sandbox_image):
    with DockerSandbox(SandboxConfig(image=sandbox_image), docker_client) as sb:
        sb.exec("head -c 2000000 /dev/urandom > /work/blob")
        fallback = sb.size(timeout=0)  # the daemon cannot answer in 0 s
        assert fallback.method == "upperdir_walk" and fallback.bytes >= 2_000_000
        primary = sb.size()
        assert primary.method == "docker_size_rw" and abs(primary.bytes - fallback.bytes) < 1_000_000


def test_put_into_the_workdir_needs_no_exec_and_errors_stay_one_line(docker_client, sandbox_image, tmp_path):
    """Issue 12: `put` into the workdir unpacks straight away (no `mkdir -p` exec; a workdir the
    agent removed is made then); elsewhere the directory is made first; a file in the way is a
    RebRayError, a removed sandbox SandboxGone."""
    import time

    from reb_ray.sandbox.docker.docker_sandbox import SandboxGone

    (tmp_path / "x.txt").write_text("x")
    with DockerSandbox(SandboxConfig(image=sandbox_image, sweep_id="test"), docker_client) as sb:
        since = time.time() - 1

        def execs() -> int:  # the daemon's own record: its exec_create events for the container
            events = docker_client.api.events(since=since, until=time.time() + 1, decode=True,
                                              filters={"container": sb.id, "event": "exec_create"})
            return sum(1 for _ in events)

        sb.put(tmp_path / "x.txt", f"{sb.workdir}/x.txt")
        assert execs() == 0
        sb.put(tmp_path / "x.txt", f"{sb.workdir}/a/b/x.txt")  # elsewhere: made, then unpacked
        assert execs() == 1 and sb.exec(["cat", f"{sb.workdir}/a/b/x.txt"]).output == "x"
        assert sb.exec(["rm", "-rf", sb.workdir]).ok
        sb.put(tmp_path / "x.txt", f"{sb.workdir}/x.txt")  # the workdir is gone: made after all
        assert sb.exec(["cat", f"{sb.workdir}/x.txt"]).output == "x"
        with pytest.raises(RebRayError, match="mkdir -p /work/x.txt/y failed") as raised:
            sb.put(tmp_path / "x.txt", f"{sb.workdir}/x.txt/y/z.txt")  # a file where a directory should be
        assert not isinstance(raised.value, SandboxGone)
        docker_client.api.remove_container(sb.id, force=True)
        with pytest.raises(SandboxGone):
            sb.put(tmp_path / "x.txt", f"{sb.workdir}/x.txt")
