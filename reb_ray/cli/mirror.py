"""`reb-ray mirror --suite S --repo-mirror DIR`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from reb_ray.cli.aliases import either, old_name


def mirror(
    repo_mirror: Optional[Path] = typer.Option(None, "--repo-mirror", help="Mirror root to create or update (required); sweeps use it with --repo-mirror DIR."),
    old_dir: Optional[Path] = old_name("--dir", "--repo-mirror"),
    suite: str = typer.Option("demo", help="Suite whose git repositories to mirror."),
    tasks: Optional[str] = typer.Option(None, help="Pattern(s) on task ids."),
    tasks_root: Optional[Path] = typer.Option(None, help="Directory holding suites (default: bundled)."),
) -> None:
    """Create or update bare mirrors of a suite's repositories; exit 1 if a pinned commit is missing."""
    from reb_ray.errors import RebRayError
    from reb_ray.suite.mirror import update_mirrors

    dir = either(repo_mirror, old_dir, "--dir", "--repo-mirror")
    if dir is None:
        raise RebRayError("missing option --repo-mirror: the mirror root to create or update")
    from reb_ray.suite.load import load_suite, select_tasks

    results = update_mirrors(select_tasks(load_suite(suite, tasks_root), tasks), dir,
                             progress=lambda line: typer.echo(line, err=True))
    for r in results:
        mark = "ok" if r.has_commit else "MISSING"
        typer.echo(f"{r.state:8} {mark:8} {r.repo}  {r.path}" + (f"  {r.detail}" if r.detail else ""))
    typer.echo(f"{len(results)} repositor{'y' if len(results) == 1 else 'ies'} mirrored under {dir}")
    if any(not r.has_commit for r in results):
        raise typer.Exit(1)
