"""A node's own check (reb_ray/node/health.py) against the real Docker daemon of this machine."""

from __future__ import annotations

import shutil
import socket
import uuid

import pytest

from reb_ray.node.health import check_node, running_trials
from reb_ray.sandbox.ownership import MANAGED, OWNER_HOST, TRIAL

pytestmark = pytest.mark.docker


def test_a_healthy_node_has_its_image_docker_disk_and_gpus(sandbox_image):
    health = check_node(sandbox_image)
    assert health.host == socket.gethostname()
    assert (health.docker, health.image_present, health.problems, health.ok) == (None, True, [], True)
    assert health.free_disk_bytes is not None and health.free_disk_bytes > 0
    assert isinstance(health.running_trials, int)
    if shutil.which("nvidia-smi") is None:
        assert health.gpu_models == []
    else:  # one name per GPU
        assert health.gpu_models and all(isinstance(name, str) and name for name in health.gpu_models)


def test_a_missing_image_is_a_problem_named_with_its_tag(docker_client):
    tag = f"reb-ray/sandbox:absent-{uuid.uuid4().hex[:8]}"
    health = check_node(tag)
    assert health.image_present is False and not health.ok
    assert [p for p in health.problems if tag in p and "reb-ray image build" in p]


def test_an_unreachable_daemon_is_a_problem_and_the_rest_unknown(monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-daemon.sock")
    health = check_node("reb-ray/sandbox:any", docker_timeout_s=5)
    assert health.docker and not health.ok
    assert (health.image_present, health.free_disk_bytes, health.running_trials) == (None, None, None)
    assert health.problems[-1].startswith("docker: ")


def test_running_trials_counts_running_trial_containers_of_this_host_only(docker_client, sandbox_image):
    host = f"reb-test-{uuid.uuid4().hex[:8]}"
    base = {MANAGED: "true", TRIAL: "t"}
    specs = [
        ({**base, OWNER_HOST: host}, True),  # counted
        ({**base, OWNER_HOST: f"{host}-other"}, True),  # another host's
        ({MANAGED: "true", OWNER_HOST: host}, True),  # ours but no trial (e.g. a GPU probe container)
        ({**base, OWNER_HOST: host}, False),  # created, never started
    ]
    made = []
    try:
        for labels, start in specs:
            create = docker_client.containers.run if start else docker_client.containers.create
            kwargs = {"detach": True} if start else {}
            made.append(create(sandbox_image, ["sleep", "120"], labels=labels, **kwargs))
        assert running_trials(docker_client, host) == 1
        made[0].remove(force=True)
        assert running_trials(docker_client, host) == 0
    finally:
        for container in made:
            try:
                container.remove(force=True)
            except Exception:  # noqa: BLE001 - already removed above
                pass


def test_a_sweeps_directories_and_free_space_are_checked_without_docker(tmp_path):
    from reb_ray.node.health import check_node

    (tmp_path / "mirrors").mkdir()
    health = check_node(None, min_free_bytes=1, paths=[("repo mirror", str(tmp_path / "mirrors")),
                                                       ("assets", str(tmp_path / "no-assets"))])
    assert health.problems == [f"assets {tmp_path / 'no-assets'}: no such directory on this node"]
    assert not health.docker_checked and health.memory_bytes > 0 and health.free_disk_bytes > 0
    assert "trials need >= " in check_node(None, min_free_bytes=1024**5).problems[0]


def test_cluster_status_fails_a_node_on_the_same_free_space_as_a_sweeps_preflight():
    """`reb-ray cluster status` (check_node's default) and a sweep's preflight (the cluster
    section's default) draw the line at the same free space; doctor's larger figure only warns."""
    import inspect

    from reb_ray.models.sweep import ClusterSettings
    from reb_ray.node.doctor import MIN_FREE_BYTES
    from reb_ray.node.health import check_node

    default = inspect.signature(check_node).parameters["min_free_bytes"].default
    assert default == ClusterSettings().min_free_bytes < MIN_FREE_BYTES
    assert default == 2 * 1024**3
