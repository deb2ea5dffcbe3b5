"""Shared fixtures: a real Docker daemon and the real sandbox image (CI builds both first)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# CLI tests run the real console scripts (`reb-ray`) installed beside the interpreter running
# pytest, whether or not its venv is activated (CI runs `.venv/bin/python -m pytest`).
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"

from reb_ray.sandbox import SandboxConfig, open_sandbox


@pytest.fixture(scope="session")
def docker_client():
    """A client of the real daemon. Fails (never skips) when Docker is unavailable."""
    from reb_ray.sandbox.docker_client import connect

    return connect()


@pytest.fixture(scope="session")
def sandbox_image(docker_client) -> str:
    """The minimal profile's image, built if missing (a no-op when CI already built it)."""
    from reb_ray.sandbox.image import build_image

    return build_image(docker_client, "minimal").tag


@pytest.fixture(params=["docker", "local"])
def provider(request) -> str:
    return request.param


@pytest.fixture
def make_sandbox(provider, request):
    """Factory for sandboxes of the parametrised provider; all are closed after the test."""
    made = []

    def make(**overrides):
        image = request.getfixturevalue("sandbox_image") if provider == "docker" else None
        config = SandboxConfig(image=image, sweep_id="test", trial_id=request.node.name[:60], **overrides)
        sandbox = open_sandbox(provider, config, trusted=True)
        made.append(sandbox)
        return sandbox

    yield make
    for sandbox in made:
        sandbox.close()
