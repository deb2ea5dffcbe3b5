"""Removing containers whose owner process is gone, or of one dead attempt.

A driver or slot worker killed with SIGKILL leaves its sandboxes running; a later sweep must
remove them, and only them, or they hold the node's CPUs, GPUs and disk for ever.

`reap` removes only containers labelled `reb-ray.managed=true` whose owner ran on this host and
no longer runs (pid gone, or pid reused by a process with another start time). Containers of
live owners, of owners on other hosts, and anyone else's containers are never touched.
`remove_attempt` removes the containers (and image) of one named attempt of one sweep run at once
(its trial actor died, so its retry does not run beside it), whatever their owner's state. `reap_images` (part of `reap`)
removes per-attempt images left behind (agent-phase GPU sharing commits one per attempt): an
image committed from one of our containers carries that container's labels (ours, its attempt
and its owner), so the same owner rule applies; the sandbox image itself has no owner label
and is never touched, nor is a kept environment's image (labelled `reb-ray.env-kept=true`).
"""

from __future__ import annotations

import docker

from reb_ray.sandbox.docker.docker_client import connect, labelled_images
from reb_ray.sandbox.ownership import ATTEMPT, ATTEMPT_IMAGE, KEPT_ENV, MANAGED, RUN, SWEEP, TRIAL, Owner


def orphaned_containers(client: docker.DockerClient) -> list:
    """Our containers (running or not) whose owner on this host is gone. A container removed
    while the list is read (another sweep's reaper, a trial's own close) is left out."""
    orphans = []
    for container in client.containers.list(all=True, ignore_removed=True, filters={"label": f"{MANAGED}=true"}):
        owner = Owner.from_labels(container.labels)
        if owner is not None and owner.is_local() and not owner.is_alive():
            orphans.append(container)
    return orphans


def reap(client: docker.DockerClient | None = None) -> list[str]:
    """Remove orphaned containers, then orphaned per-attempt images; returns their ids.
    Raises DockerUnavailable."""
    client = client or connect()
    return _remove(orphaned_containers(client)) + reap_images(client)


def orphaned_images(client: docker.DockerClient) -> list:
    """Images labelled as one of our attempts' (`reb-ray.managed=true` and a trial label) whose
    owner on this host is gone. One removed while they are listed (another sweep's reaper on a
    shared daemon) is not among them."""
    orphans = []
    for image in labelled_images(client, [f"{MANAGED}=true", TRIAL]):
        if (image.labels or {}).get(KEPT_ENV) == "true":
            continue  # a kept environment (reb_ray.environment.keep) outlives its owner
        owner = Owner.from_labels(image.labels or {})
        if owner is not None and owner.is_local() and not owner.is_alive():
            orphans.append(image)
    return orphans


def reap_images(client: docker.DockerClient | None = None) -> list[str]:
    """Remove orphaned per-attempt images (`orphaned_images`); returns their ids. An image
    already gone, or still used by a container, is left (the container's reap frees it for the
    next one). Raises DockerUnavailable."""
    client = client or connect()
    removed = []
    for image in orphaned_images(client):
        try:
            client.images.remove(image.id, force=False)
            removed.append(image.id)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if exc.status_code != 409:  # 409: in use by a container, or a removal in progress
                raise
    return removed


def remove_attempt(sweep_id: str, trial_id: str, attempt: int, client: docker.DockerClient | None = None,
                   run_id: str | None = None) -> list[str]:
    """Remove this host's containers labelled with `sweep_id`, `trial_id` and `attempt` (running
    or not, the agent inside included), and with `run_id` when given (the sweep run's
    `reb-ray.run` label: another sweep of the same id on this daemon, writing elsewhere, has the
    same three labels and keeps its containers); returns their ids. Raises DockerUnavailable."""
    client = client or connect()
    labels = [f"{MANAGED}=true", f"{SWEEP}={sweep_id}", f"{TRIAL}={trial_id}", f"{ATTEMPT}={attempt}"]
    if run_id:
        labels.append(f"{RUN}={run_id}")
    removed = _remove(client.containers.list(all=True, ignore_removed=True, filters={"label": labels}))
    return removed + _remove_images(client, labelled_images(client, [*labels, f"{ATTEMPT_IMAGE}=true"]))


def _remove_images(client: docker.DockerClient, images) -> list[str]:
    """Force-remove `images`; the ids of those removed (one already gone is not an error)."""
    removed = []
    for image in images:
        try:
            client.images.remove(image.id, force=True)
            removed.append(image.id)
        except docker.errors.NotFound:
            pass
    return removed


def _remove(containers) -> list[str]:
    """Force-remove `containers` (volumes too); the ids of those removed. One already gone, or
    whose removal is already in progress (Docker's 409: another reaper, or the trial's own
    close, got there first), is not an error and counts as removed when it is in progress."""
    removed = []
    for container in containers:
        try:
            container.remove(force=True, v=True)
            removed.append(container.id)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if exc.status_code != 409 or "in progress" not in str(exc):
                raise
            removed.append(container.id)
    return removed
