"""`reb-ray assets fetch`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from reb_ray.cli.aliases import either, old_name

app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Fill the read-only asset cache the probes use.")


@app.command("fetch")
def fetch(
    assets: Optional[Path] = typer.Option(None, "--assets", help="Asset cache directory to fill (required; later passed to sweeps as --assets)."),
    old_dir: Optional[Path] = old_name("--dir", "--assets"),
    suite: str = typer.Option("demo", help="Suite whose task assets to fetch."),
    tasks: Optional[str] = typer.Option(None, help="Pattern(s) on task ids."),
    tasks_root: Optional[Path] = typer.Option(None, help="Directory holding suites (default: bundled)."),
) -> None:
    """Fetch every asset the selected tasks declare; exit 1 if any could not be fetched."""
    from reb_ray.errors import RebRayError
    from reb_ray.suite.assets import fetch_assets

    dir = either(assets, old_dir, "--dir", "--assets")
    if dir is None:
        raise RebRayError("missing option --assets: the asset cache directory to fill")
    from reb_ray.suite.load import load_suite, select_tasks

    results = fetch_assets(select_tasks(load_suite(suite, tasks_root), tasks), dir)
    for r in results:
        typer.echo(f"{r.state:8} {r.task_id}/{r.asset}" + (f"  {r.detail}" if r.detail else ""))
    typer.echo(f"{len(results)} asset(s): {sum(r.state != 'failed' for r in results)} in the cache at {dir}")
    if any(r.state == "failed" for r in results):
        raise typer.Exit(1)
