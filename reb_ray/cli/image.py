"""`reb-ray image build|tag`."""

from __future__ import annotations

from typing import Optional

import typer

app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Build and inspect the sandbox image.")


@app.command("build")
def build(
    profile: Optional[str] = typer.Option(None, help="paper (CUDA base from a registry) | minimal (debootstrap, no registry); default: $REB_RAY_IMAGE_PROFILE, else minimal."),
    force: bool = typer.Option(False, help="Rebuild even if an image with the same input hash exists."),
    sandbox: str = typer.Option("docker", help="docker | podman: podman builds with Docker here, then copies the image "
                                "into the Podman service's store (`docker save | podman load`, streamed)."),
) -> None:
    """Build the sandbox image for a profile; prints the tag, build time and image size."""
    import time

    from reb_ray.sandbox import provider_class
    from reb_ray.sandbox.docker.docker_client import connect
    from reb_ray.sandbox.docker.image import DEFAULT_PROFILE, build_image, image_tag, transfer_image

    profile = profile or DEFAULT_PROFILE
    image_tag(profile)  # validates the profile name before touching Docker
    target = provider_class(sandbox)  # an unknown provider fails here, with the known ones
    docker_client = connect(timeout=1800)
    typer.echo(f"building the {profile} sandbox image unless one with the same inputs exists "
               "(the first build takes minutes)", err=True)
    report = build_image(docker_client, profile, force=force)
    state = "built" if report.built else "up to date"
    typer.echo(f"{report.tag}: {state} in {report.seconds:.1f} s, size {report.size_bytes / 1e6:.0f} MB")
    if target.capabilities.image and not target.builds_images:  # an engine that takes the image from Docker's
        start = time.monotonic()
        copied = transfer_image(docker_client, target.connect_engine(timeout=1800), report.tag)
        typer.echo(f"{report.tag}: {'copied into' if copied else 'already in'} the {target.engine_name} store "
                   f"in {time.monotonic() - start:.1f} s")


@app.command("tag")
def tag(profile: Optional[str] = typer.Option(None, help="Image profile (default: $REB_RAY_IMAGE_PROFILE, else minimal).")) -> None:
    """Print the tag the profile's image has for the current build inputs."""
    from reb_ray.sandbox.docker.image import DEFAULT_PROFILE, image_tag

    profile = profile or DEFAULT_PROFILE
    typer.echo(image_tag(profile))
