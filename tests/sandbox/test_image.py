"""Image profiles and the input-hash tag."""

from __future__ import annotations

import pytest

from reb_ray.errors import UnknownName
from reb_ray.sandbox.docker.image import build_image, image_tag


def test_tag_is_stable_and_differs_per_profile():
    assert image_tag("minimal") == image_tag("minimal")
    assert image_tag("minimal").startswith("reb-ray/sandbox:minimal-")
    assert image_tag("paper").startswith("reb-ray/sandbox:paper-")
    assert image_tag("minimal").split("-")[-1] != image_tag("paper").split("-")[-1]


def test_unknown_profile_lists_valid_names():
    with pytest.raises(UnknownName, match="valid: minimal, paper"):
        image_tag("cuda11")


def test_unchanged_image_is_not_rebuilt(docker_client, sandbox_image):
    report = build_image(docker_client, "minimal")
    assert report.tag == sandbox_image and report.built is False
    assert report.size_bytes > 100_000_000


def test_image_has_the_promised_contents(docker_client, sandbox_image):
    out = docker_client.containers.run(
        sandbox_image,
        ["sh", "-c", "python3 -m venv /tmp/v && /tmp/v/bin/pip --version >/dev/null && git --version && gcc --version | head -1 && g++ --version | head -1 && test -s /etc/ssl/certs/ca-certificates.crt && echo ALL-OK"],
        remove=True,
    ).decode()
    assert "ALL-OK" in out and "git version" in out
