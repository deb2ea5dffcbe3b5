"""`reb-ray env`: environments as artifacts (export, verify, list kept images, apply the disk budget)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from reb_ray.cli.aliases import either, old_name

app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Environments agents built: export them, rebuild them, list those kept.")


@app.command("export")
def export(
    output: Path = typer.Argument(..., help="Output directory of sweeps (holds trials/)."),
    trial_id: str = typer.Argument(..., help="The trial id, <agent>/<task_id>/<trial_index>."),
    out: Path = typer.Option(..., "--out", help="Directory to write (new or empty)."),
    attempt: Optional[int] = typer.Option(None, "--attempt", help="This attempt (default: the last scored)."),
    sweep_id: Optional[str] = typer.Option(None, "--sweep-id", help="The sweep, when the directory holds the trial in several."),
    old_sweep: Optional[str] = old_name("--sweep", "--sweep-id"),
    image: bool = typer.Option(False, "--image", help="Add the kept image as image.tar (docker save; on its node)."),
    wheels: bool = typer.Option(True, "--wheels/--no-wheels", help="Copy the locked wheels the node holds into wheels/."),
    tasks_root: Optional[Path] = typer.Option(None, "--tasks-root", help="Directory of suites (default: the bundled tasks/)."),
    repo_mirror: list[Path] = typer.Option([], "--repo-mirror", help="Directory of bare mirrors for fetched tasks."),
) -> None:
    """Write a directory that rebuilds the attempt's environment: Dockerfile, locks, wheels,
    manifest, report, README (what it could not capture)."""
    from reb_ray.environment.export import export as run_export

    typer.echo(f"exporting {trial_id} from {output} to {out}: locks, manifest, report"
               + (", wheels" if wheels else "") + (", the kept image (docker save)" if image else ""), err=True)
    sweep_id = either(sweep_id, old_sweep, "--sweep", "--sweep-id")
    info = run_export(output, trial_id, out, attempt=attempt, sweep_id=sweep_id, image=image, wheels=wheels,
                      tasks_root=tasks_root, mirrors=repo_mirror)
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    typer.echo(f"exported {info['trial_id']} attempt {info['attempt']} to {out}: {info['locked_hashed']} hashed + "
               f"{info['locked_unhashed']} unhashed package(s), {info['wheels']} wheel(s), "
               f"{len(info['not_captured'])} gap(s) in README.md, {size / 1e6:.1f} MB")


@app.command("verify")
def verify(
    export_dir: Path = typer.Argument(..., help="A directory written by `reb-ray env export`."),
    output: Optional[Path] = typer.Option(None, "--output", help="Keep the verification trial's artifacts here."),
    cache: bool = typer.Option(False, "--cache/--no-cache", help="Let docker reuse layers of an earlier build."),
    tasks_root: Optional[Path] = typer.Option(None, "--tasks-root", help="Directory of suites (default: the bundled tasks/)."),
    keep_image: bool = typer.Option(False, "--keep-image", help="Keep the rebuilt image (reb-ray/env-verify:<digest>)."),
    repo_mirror: list[Path] = typer.Option([], "--repo-mirror", help="Directory of bare mirrors for fetched tasks."),
) -> None:
    """Rebuild the export, run the probe phase on it with no agent, compare each stage with the
    source attempt's; prints `reproducible: yes|no|not attempted` (exit 0, 1 or 3: the last
    line says which)."""
    from reb_ray.sweep.env_verify import verify as run_verify

    # Steps on stderr as they happen (minutes each); stdout keeps the result, the verdict last.
    record = run_verify(export_dir, output, no_cache=not cache, tasks_root=tasks_root, keep_image=keep_image,
                        mirrors=repo_mirror, progress=lambda line: typer.echo(line, err=True))
    source = record.get("source_agent_wall_time_s")
    ratio = f" ({record['build_s'] / source:.2f}x the agent phase's {source:.1f} s)" if source else ""
    typer.echo(f"rebuild: {'built' if record['built'] else 'failed'} in {record['build_s']:.1f} s{ratio}")
    if record.get("rebuilt_stages"):
        typer.echo("stages: " + ", ".join(f"{k} {v}" for k, v in record["rebuilt_stages"].items()))
    if record.get("packages_missing") or record.get("packages_extra"):
        typer.echo(f"packages missing: {record['packages_missing']}; extra: {record['packages_extra']}")
    typer.echo(record["verdict"])
    # Exit codes (reb_ray.cli.exits): yes 0; no 1 (the check failed); not attempted 3 (undone).
    raise typer.Exit({True: 0, False: 1}.get(record.get("reproducible"), 3))


@app.command("list")
def list_kept(
    sweep_id: Optional[str] = typer.Option(None, "--sweep-id", help="Only this sweep's."),
    old_sweep: Optional[str] = old_name("--sweep", "--sweep-id"),
    output: Optional[Path] = typer.Option(None, "--output", help="Only the images this output directory's trials rows record (another user's sweep of the same configuration has the same sweep id)."),
) -> None:
    """The kept-environment images on this node: tag, sweep, trial, attempt, size."""
    from reb_ray.environment.keep import kept_images, recorded_images
    from reb_ray.sizes import size_text
    from reb_ray.sandbox.docker.docker_client import connect
    from reb_ray.sandbox.ownership import ATTEMPT, SWEEP, TRIAL

    sweep_id = either(sweep_id, old_sweep, "--sweep", "--sweep-id")
    only = None if output is None else recorded_images(output)
    for image in kept_images(connect(), sweep_id, only=only):
        labels = image.labels or {}
        tag = image.tags[0] if image.tags else image.id[:19]
        typer.echo(f"{tag}  {labels.get(SWEEP)}  {labels.get(TRIAL)}  attempt {labels.get(ATTEMPT)}  "
                   f"{size_text(image.attrs.get('Size'))}")


@app.command("gc")
def gc(
    env_disk_budget_gb: Optional[float] = typer.Option(None, "--env-disk-budget-gb", help="Budget in GiB for the kept images' own layers on this node (default: the sweeps' default, 50 GiB or half the Docker disk's free space when less)."),
    sweep_id: Optional[str] = typer.Option(None, "--sweep-id", help="Only this sweep's kept images count, and only they may be removed."),
    old_sweep: Optional[str] = old_name("--sweep", "--sweep-id"),
    old_budget: Optional[float] = old_name("--budget", "--env-disk-budget-gb"),
    output: Optional[Path] = typer.Option(None, "--output", help="Only the kept images this output directory's trials rows record count, and only they may be removed: on a Docker daemon shared with other users, whose sweeps of the same configuration have the same sweep id."),
) -> None:
    """Apply the disk budget to this node's kept environments by hand: the oldest are removed
    until the rest fits (any larger than the whole budget first); prints each removed and kept
    image with its size."""
    from reb_ray.environment.keep import apply_budget, recorded_images
    from reb_ray.sizes import size_text
    from reb_ray.errors import RebRayError
    from reb_ray.sandbox.docker.docker_client import connect

    sweep_id = either(sweep_id, old_sweep, "--sweep", "--sweep-id")
    budget_gb = either(env_disk_budget_gb, old_budget, "--budget", "--env-disk-budget-gb")
    if budget_gb is not None and budget_gb < 0:
        raise RebRayError(f"--env-disk-budget-gb {budget_gb}: a budget is GiB >= 0")
    only = None if output is None else recorded_images(output)
    result = apply_budget(connect(), None if budget_gb is None else int(budget_gb * 1024**3), sweep_id, only)

    def line(verb: str, image, extra: str = "") -> str:
        return (f"{verb} {image.tag}  {size_text(image.layer_bytes)}  sweep {image.sweep_id}  trial {image.trial_id}  attempt {image.attempt}  "
                f"created {image.created:%Y-%m-%d %H:%M:%S}{extra}")

    for image in result.removed:
        typer.echo(line("removed", image))
    for image, why in result.failed:
        typer.echo(line("not removed", image, f"  ({why})"))
    for image in result.kept:
        typer.echo(line("kept", image))
    freed = sum(i.layer_bytes or 0 for i in result.removed)
    typer.echo(f"budget {size_text(result.budget_bytes)}: removed {len(result.removed)} image(s), {size_text(freed)}; "
               f"kept {len(result.kept) + len(result.failed)}, {size_text(result.kept_bytes)}")
