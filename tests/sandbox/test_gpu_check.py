"""The node GPU check against this machine's real Docker, which has no NVIDIA runtime."""

from __future__ import annotations

from reb_ray.sandbox.docker.gpu_check import docker_gpu_problem
from reb_ray.sandbox.ownership import SWEEP


def test_docker_without_nvidia_runtime_cannot_give_gpus_and_the_probe_is_removed(docker_client, sandbox_image):
    problem = docker_gpu_problem(docker_client, sandbox_image)
    assert problem is not None and "could not select device driver" in problem and "runc" in problem
    assert docker_client.containers.list(all=True, filters={"label": f"{SWEEP}=gpu-check"}) == []  # no probe left


def test_without_the_image_docker_info_decides(docker_client):
    problem = docker_gpu_problem(docker_client, "reb-ray/no-such-image:0")
    assert problem is not None and "no NVIDIA runtime or CDI" in problem
