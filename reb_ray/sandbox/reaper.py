"""Removing containers whose owner process is gone (field case F13).

Only containers labelled `reb-ray.managed=true` whose owner ran on this host and no longer
runs (pid gone, or pid reused by a process with another start time) are removed. Containers of
live owners, of owners on other hosts, and anyone else's containers are never touched.
"""

from __future__ import annotations

import docker

from reb_ray.sandbox.docker_client import connect
from reb_ray.sandbox.ownership import MANAGED, Owner


def orphaned_containers(client: docker.DockerClient) -> list:
    """Our containers (running or not) whose owner on this host is gone."""
    orphans = []
    for container in client.containers.list(all=True, filters={"label": f"{MANAGED}=true"}):
        owner = Owner.from_labels(container.labels)
        if owner is not None and owner.is_local() and not owner.is_alive():
            orphans.append(container)
    return orphans


def reap(client: docker.DockerClient | None = None) -> list[str]:
    """Remove orphaned containers; returns their ids. Raises DockerUnavailable."""
    client = client or connect()
    removed = []
    for container in orphaned_containers(client):
        try:
            container.remove(force=True, v=True)
            removed.append(container.id)
        except docker.errors.NotFound:
            pass
    return removed
