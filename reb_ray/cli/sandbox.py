"""`reb-ray sandbox list|reap`."""

from __future__ import annotations

import typer

app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Inspect and clean up sandbox containers.")


_SANDBOX = typer.Option("docker", help="docker | podman: the engine whose containers are meant.")


@app.command("list")
def list_(sandbox: str = _SANDBOX) -> None:
    """List containers labelled reb-ray.managed=true, with owner and whether it is alive."""
    from reb_ray.sandbox import provider_class
    from reb_ray.sandbox.ownership import MANAGED, TRIAL, Owner

    client = provider_class(sandbox).connect_engine()
    containers = client.containers.list(all=True, ignore_removed=True, filters={"label": f"{MANAGED}=true"})
    if not containers:
        typer.echo("no reb-ray containers")
    for container in containers:
        owner = Owner.from_labels(container.labels)
        alive = "?" if owner is None or not owner.is_local() else ("alive" if owner.is_alive() else "gone")
        typer.echo(f"{container.short_id}  {container.status:8}  trial={container.labels.get(TRIAL, '')}  "
                   f"owner={owner.host if owner else '?'}:{owner.pid if owner else '?'} ({alive})")


@app.command("reap")
def reap(sandbox: str = _SANDBOX) -> None:
    """Remove our containers whose owner process is gone; never anyone else's."""
    from reb_ray.sandbox import provider_class
    from reb_ray.sandbox.docker.reaper import reap as reap_orphans

    removed = reap_orphans(provider_class(sandbox).connect_engine())
    typer.echo(f"removed {len(removed)} orphaned sandbox container(s)")
    for container_id in removed:
        typer.echo(f"  {container_id[:12]}")
