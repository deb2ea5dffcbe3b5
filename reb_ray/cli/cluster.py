"""`reb-ray cluster status`: one line per node of the Ray cluster reb-ray runs on."""

from __future__ import annotations

from typing import Optional

import typer

app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Inspect the Ray cluster sweeps run on (see cluster.yaml).")


@app.command("status")
def status(
    address: str = typer.Option("auto", help="Ray cluster address (auto: the cluster this machine belongs to)."),
    profile: Optional[str] = typer.Option(None, help="Sandbox image profile whose image each node must have (default: $REB_RAY_IMAGE_PROFILE, else minimal)."),
    timeout: float = typer.Option(60.0, help="Seconds to wait for all nodes' checks."),
) -> None:
    """Per node: address, host, GPUs and model, sandbox slots, CPUs, image, free disk, Docker,
    running trials, and what is wrong. Exits 1 when a node has a problem."""
    from reb_ray.errors import RebRayError
    from reb_ray.orchestrators.cluster_status import cluster_status, connect
    from reb_ray.sandbox.docker.image import DEFAULT_PROFILE, image_tag

    tag = image_tag(profile or DEFAULT_PROFILE)
    try:
        connect(address)
    except ConnectionError as exc:
        raise RebRayError(f"no Ray cluster at --address {address}: {' '.join(str(exc).split())[:200]}") from None
    statuses = cluster_status(tag, timeout_s=timeout)
    for node in statuses:
        typer.echo(node_line(node))
    bad = [n for n in statuses if not n.ok]
    typer.echo(f"{len(statuses)} node(s), {len(statuses) - len(bad)} ok; image {tag}")
    if bad:
        raise typer.Exit(1)


def node_line(node) -> str:
    """One `NodeStatus` as a line; unknown values print as `?`."""
    health = node.health
    parts = [node.address, health.host if health else "?", "ok" if node.ok else "FAIL", f"gpus {_gpus(node)}",
             f"slots {'-' if node.slots is None else node.slots}", f"cpus {node.cpus:g}"]
    if health is None:
        return "  ".join([*parts, f"no check: {node.error}"])
    image = "?" if health.image_present is None else ("ok" if health.image_present else "missing")
    disk = "?" if health.free_disk_bytes is None else f"{health.free_disk_bytes / 1e9:.1f} GB free"
    trials = "?" if health.running_trials is None else str(health.running_trials)
    parts += [f"image {image}", f"disk {disk}", f"docker {'ok' if health.docker is None else 'down'}",
              f"trials running {trials}"]
    if health.problems:
        parts.append("-- " + "; ".join(health.problems))
    return "  ".join(parts)


def _gpus(node) -> str:
    models = node.health.gpu_models if node.health else None
    if not models:
        return str(node.gpus)
    if len(set(models)) == 1:
        return f"{node.gpus} x {models[0]}"
    return f"{node.gpus} ({', '.join(models)})"
