"""Cold and warm `reb-ray image build` times and the image size.

Cold: the profile's image and its debootstrapped base are removed first, so everything is
built (debootstrap, import, docker build). Warm: the same command again (input hash matches).
Usage: python benchmarks/image_build.py [profile]
"""

from __future__ import annotations

import sys

from docker.errors import ImageNotFound

from reb_ray.sandbox.docker.docker_client import connect
from reb_ray.sandbox.docker.image import base_ref, build_image, get_profile, image_tag


def main(profile: str = "minimal") -> None:
    client = connect(timeout=1800)
    for ref in (image_tag(profile), base_ref(get_profile(profile))):
        try:
            client.images.remove(ref, force=True)
        except ImageNotFound:
            pass
    cold = build_image(client, profile)
    warm = build_image(client, profile)
    print(f"profile {profile}: {cold.tag}")
    print(f"cold build: {cold.seconds:.1f} s (built={cold.built})")
    print(f"warm build: {warm.seconds:.2f} s (built={warm.built})")
    print(f"image size: {cold.size_bytes / 1e6:.0f} MB")


if __name__ == "__main__":
    main(*(sys.argv[1:2]))
