"""`reb-ray assets fetch`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

app = typer.Typer(no_args_is_help=True, help="Fill the read-only asset cache the probes use.")


@app.command("fetch")
def fetch(
    dir: Path = typer.Option(..., "--dir", help="Asset cache directory (later passed to sweeps as --assets)."),
    suite: str = typer.Option("demo", help="Suite whose task assets to fetch."),
    tasks: Optional[str] = typer.Option(None, help="Pattern(s) on task ids."),
    tasks_root: Optional[Path] = typer.Option(None, help="Directory holding suites (default: bundled)."),
) -> None:
    """Fetch every asset the selected tasks declare; exit 1 if any could not be fetched."""
    from reb_ray.suite.assets import fetch_assets
    from reb_ray.suite.load import load_suite, select_tasks

    results = fetch_assets(select_tasks(load_suite(suite, tasks_root), tasks), dir)
    for r in results:
        typer.echo(f"{r.state:8} {r.task_id}/{r.asset}" + (f"  {r.detail}" if r.detail else ""))
    typer.echo(f"{len(results)} asset(s): {sum(r.state != 'failed' for r in results)} in the cache at {dir}")
    if any(r.state == "failed" for r in results):
        raise typer.Exit(1)
