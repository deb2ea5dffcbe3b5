"""Reading files out of an image without running it.

A container of the image is created, never started (so nothing of the image runs, and no
network is attached), the path is read as a tar stream through the engine's archive API, and
the container is removed on every path, a failed read included. The client is a Docker SDK
client (Docker's, or Podman's Docker-compatible service).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

log = logging.getLogger(__name__)


@contextmanager
def image_archive(client: Any, image: str, path: str, labels: dict[str, str] | None = None) -> Iterator[Iterator[bytes]]:
    """The tar stream (chunks of bytes) of `path` in `image`, valid inside the `with`; the
    container it is read through carries `labels`. Raises what the engine's client raises
    (an unknown image, a missing path); a failed removal is logged, never raised over the
    read's own outcome."""
    container = client.containers.create(image, command=["true"], network_disabled=True, labels=dict(labels or {}))
    try:
        stream, _stat = container.get_archive(path)
        yield stream
    finally:
        try:
            container.remove(force=True)
        except Exception as exc:  # noqa: BLE001 - the engine's own trouble; the reaper removes it later
            log.warning("cannot remove the container %s that read %s out of %s: %s", container.id[:12], path, image, exc)
