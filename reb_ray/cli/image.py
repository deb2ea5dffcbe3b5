"""`reb-ray image build|tag`."""

from __future__ import annotations

import typer

from reb_ray.sandbox.image import DEFAULT_PROFILE, build_image, image_tag

app = typer.Typer(no_args_is_help=True, help="Build and inspect the sandbox image.")


@app.command("build")
def build(
    profile: str = typer.Option(DEFAULT_PROFILE, help="paper (CUDA base from a registry) | minimal (debootstrap, no registry)."),
    force: bool = typer.Option(False, help="Rebuild even if an image with the same input hash exists."),
) -> None:
    """Build the sandbox image for a profile; prints the tag, build time and image size."""
    from reb_ray.sandbox.docker_client import connect

    image_tag(profile)  # validates the profile name before touching Docker
    report = build_image(connect(timeout=1800), profile, force=force)
    state = "built" if report.built else "up to date"
    typer.echo(f"{report.tag}: {state} in {report.seconds:.1f} s, size {report.size_bytes / 1e6:.0f} MB")


@app.command("tag")
def tag(profile: str = typer.Option(DEFAULT_PROFILE, help="Image profile.")) -> None:
    """Print the tag the profile's image has for the current build inputs."""
    typer.echo(image_tag(profile))
