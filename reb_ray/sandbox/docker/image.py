"""Building the sandbox image for a profile, tagged by a hash of its build inputs.

Profiles:
- `paper`: base `nvidia/cuda:12.4.1-devel-ubuntu22.04`, as in the paper (needs a registry).
- `minimal`: base root filesystem made here with `debootstrap` and `docker import`, so it
  builds with no container registry at all; then the same Dockerfile steps.

The tag is `reb-ray/sandbox:<profile>-<hash12>` where the hash covers the Dockerfile, the
profile and its base; an unchanged image is never rebuilt.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import docker
from docker.errors import BuildError, DockerException, ImageNotFound

from reb_ray.errors import ImageMissing, RebRayError, UnknownName
from reb_ray.paths import images_dir

IMAGE_REPO = "reb-ray/sandbox"
BASE_REPO = "reb-ray/debian-base"
DEFAULT_PROFILE = os.environ.get("REB_RAY_IMAGE_PROFILE", "minimal")
DEBIAN_SUITE = "bookworm"
DEBIAN_MIRROR = os.environ.get("REB_RAY_DEBIAN_MIRROR", "http://deb.debian.org/debian")


@dataclass(frozen=True)
class Profile:
    """A sandbox image profile: a registry base image, or a debootstrapped Debian suite."""

    name: str
    registry_base: str | None = None
    debian_suite: str | None = None


PROFILES = {
    "paper": Profile("paper", registry_base="nvidia/cuda:12.4.1-devel-ubuntu22.04"),
    "minimal": Profile("minimal", debian_suite=DEBIAN_SUITE),
}


@dataclass
class BuildReport:
    """What `build_image` did: the tag, whether it was built now, seconds taken, image bytes."""

    tag: str
    built: bool
    seconds: float
    size_bytes: int


def get_profile(name: str) -> Profile:
    """The profile called `name`. Raises UnknownName listing the valid names."""
    try:
        return PROFILES[name]
    except KeyError:
        raise UnknownName("image profile", name, list(PROFILES)) from None


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part)
        h.update(b"\0")
    return h.hexdigest()[:12]


def base_ref(profile: Profile) -> str:
    """The image the Dockerfile builds FROM."""
    if profile.registry_base:
        return profile.registry_base
    return f"{BASE_REPO}:{profile.debian_suite}-{_digest(b'minbase', profile.debian_suite.encode())}"


def image_tag(profile_name: str = DEFAULT_PROFILE) -> str:
    """The tag the profile's image has when built from the current inputs."""
    profile = get_profile(profile_name)
    dockerfile = (images_dir() / "Dockerfile").read_bytes()
    return f"{IMAGE_REPO}:{profile.name}-{_digest(dockerfile, profile.name.encode(), base_ref(profile).encode())}"


def require_image(client: docker.DockerClient, profile_name: str = DEFAULT_PROFILE) -> str:
    """The profile's image tag if it is built on this node. Raises ImageMissing with the fix."""
    tag = image_tag(profile_name)
    try:
        client.images.get(tag)
    except ImageNotFound:
        raise ImageMissing(
            f"sandbox image {tag} is missing: build it with `reb-ray image build --profile {profile_name}`"
        ) from None
    return tag


def _has_image(client: docker.DockerClient, ref: str) -> bool:
    try:
        client.images.get(ref)
        return True
    except ImageNotFound:
        return False


def debootstrap_base(client: docker.DockerClient, profile: Profile, mirror: str = DEBIAN_MIRROR) -> None:
    """Make the profile's Debian root filesystem with debootstrap and import it as an image.

    Needs root and the `debootstrap` command. Raises RebRayError with the fix otherwise.
    """
    if shutil.which("debootstrap") is None:
        raise RebRayError("debootstrap is not installed: run `apt-get install -y debootstrap` (as root)")
    if os.geteuid() != 0:
        raise RebRayError("building the minimal profile's base runs debootstrap, which needs root")
    ref = base_ref(profile)
    with tempfile.TemporaryDirectory(prefix="reb-ray-rootfs-") as tmp:
        rootfs, archive = Path(tmp) / "rootfs", Path(tmp) / "rootfs.tar"
        proc = subprocess.run(
            ["debootstrap", "--variant=minbase", profile.debian_suite, str(rootfs), mirror],
            capture_output=True, text=True,
        )
        if proc.returncode != 0:
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or ["no output"]
            raise RebRayError(f"debootstrap {profile.debian_suite} from {mirror} failed: {tail[0]}")
        subprocess.run(["tar", "-C", str(rootfs), "-cf", str(archive), "."], check=True)
        repository, tag = ref.split(":")
        client.api.import_image_from_file(str(archive), repository=repository, tag=tag)


def build_image(client: docker.DockerClient, profile_name: str = DEFAULT_PROFILE, force: bool = False) -> BuildReport:
    """Build the profile's image unless an image with the same input hash exists.

    Returns a BuildReport (seconds of wall time, image size in bytes). Raises UnknownName,
    RebRayError (debootstrap or docker build failure, with the failing step's last line).
    """
    profile = get_profile(profile_name)
    tag = image_tag(profile_name)
    start = time.monotonic()
    built = False
    if force or not _has_image(client, tag):
        base = base_ref(profile)
        if profile.debian_suite and (force or not _has_image(client, base)):
            debootstrap_base(client, profile)
        try:
            client.images.build(
                path=str(images_dir()), tag=tag, buildargs={"BASE": base},
                pull=bool(profile.registry_base), rm=True, forcerm=True, labels={"reb-ray.profile": profile.name},
            )
        except BuildError as exc:
            last = [str(line.get("stream", line.get("error", ""))).strip() for line in exc.build_log]
            last = [line for line in last if line][-1:] or [str(exc)]
            raise RebRayError(f"building {tag} failed: {last[0][:300]}") from None
        except DockerException as exc:
            raise RebRayError(f"building {tag} failed: {str(exc).splitlines()[0][:300]}") from None
        built = True
    size = client.images.get(tag).attrs.get("Size", 0)
    return BuildReport(tag=tag, built=built, seconds=time.monotonic() - start, size_bytes=size)


ARCHIVE_CHUNK_BYTES = 32 * 1024**2


def save_image(client: docker.DockerClient, tag: str, path: Path) -> int:
    """`docker save` of `tag` into the file `path` (an uncompressed image archive); returns
    its size in bytes. Raises ImageMissing without the image, RebRayError when Docker fails."""
    try:
        image = client.images.get(tag)
        with open(path, "wb") as f:
            for chunk in image.save(chunk_size=ARCHIVE_CHUNK_BYTES, named=True):
                f.write(chunk)
    except ImageNotFound:
        raise ImageMissing(f"sandbox image {tag} is missing here, so it cannot be shipped to other nodes") from None
    except DockerException as exc:
        raise RebRayError(f"docker save {tag} failed: {str(exc).splitlines()[0][:300]}") from None
    return path.stat().st_size


def load_image(client: docker.DockerClient, tag: str, chunks) -> None:
    """`docker load` of an archive given as an iterable of byte chunks (streamed to the daemon,
    never whole in memory), then check that `tag` is there. Raises RebRayError naming the tag."""
    try:
        for line in client.api.load_image(iter(chunks)):
            if isinstance(line, dict) and line.get("error"):
                raise RebRayError(f"docker load of {tag} failed: {str(line['error'])[:300]}")
        client.images.get(tag)
    except ImageNotFound:
        raise RebRayError(f"docker load of the shipped archive gave no image {tag}") from None
    except DockerException as exc:
        raise RebRayError(f"docker load of {tag} failed: {str(exc).splitlines()[0][:300]}") from None


def transfer_image(source: docker.DockerClient, target: docker.DockerClient, tag: str) -> bool:
    """Copy image `tag` from engine `source` (the Docker daemon that built it) into engine
    `target` (a Podman service: `docker save | podman load` without a file), unless `target`
    already holds it. Both speak the Docker API; the archive streams through this process in
    ARCHIVE_CHUNK_BYTES pieces, never whole in memory. Returns True when it copied. Raises
    ImageMissing when `source` lacks the image, RebRayError when either engine fails."""
    if _has_image(target, tag):
        return False
    try:
        chunks = source.images.get(tag).save(chunk_size=ARCHIVE_CHUNK_BYTES, named=True)
    except ImageNotFound:
        raise ImageMissing(f"sandbox image {tag} is not built here: run `reb-ray image build` first") from None
    except DockerException as exc:
        raise RebRayError(f"docker save {tag} failed: {str(exc).splitlines()[0][:300]}") from None
    load_image(target, tag, chunks)
    return True
