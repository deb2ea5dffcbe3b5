"""Every node of a real (local, one-node) Ray cluster checks itself in a task pinned to it."""

from __future__ import annotations

import socket

import pytest

pytestmark = pytest.mark.docker


def test_each_alive_node_reports_its_own_check(ray_local, sandbox_image):
    import ray

    from reb_ray.orchestrators.cluster_status import cluster_status

    statuses = cluster_status(sandbox_image, timeout_s=120)
    assert [s.node_id for s in statuses] == [n["NodeID"] for n in ray.nodes() if n["Alive"]]
    (node,) = statuses
    assert node.ok and node.error is None
    assert (node.cpus, node.gpus, node.slots) == (3.0, 0, None)  # a plain local Ray declares no reb_ray_slot
    assert node.health is not None
    assert node.health.host == socket.gethostname() and node.health.image_present is True
