"""Reading files out of an image without running it (reb_ray.sandbox.image_files), on the real
daemon: the file's bytes come back, and the container it was read through is gone afterwards,
whether the read succeeded or failed."""

from __future__ import annotations

import io
import tarfile
import uuid

import docker.errors
import pytest

from reb_ray.sandbox.image_files import image_archive

pytestmark = pytest.mark.docker


def _ours(client, label: str) -> list:
    return client.containers.list(all=True, filters={"label": f"reb-ray.test-image-files={label}"})


def test_a_file_is_read_and_no_container_is_left(docker_client, sandbox_image):
    label = uuid.uuid4().hex
    with image_archive(docker_client, sandbox_image, "/usr/lib/os-release", labels={"reb-ray.test-image-files": label}) as stream:
        assert len(_ours(docker_client, label)) == 1  # created, never started
        assert _ours(docker_client, label)[0].status == "created"
        data = b"".join(stream)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        text = tar.extractfile(tar.getmembers()[0]).read().decode()
    assert "ID=debian" in text
    assert _ours(docker_client, label) == []


def test_a_missing_path_raises_and_no_container_is_left(docker_client, sandbox_image):
    label = uuid.uuid4().hex
    with pytest.raises(docker.errors.NotFound):
        with image_archive(docker_client, sandbox_image, "/no/such/path", labels={"reb-ray.test-image-files": label}):
            pass
    assert _ours(docker_client, label) == []
