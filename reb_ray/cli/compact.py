"""`reb-ray compact RUN_DIR [--sweep-id ID] [--wait]`: merge a run's result files into a few."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def compact(
    run_dir: Path = typer.Argument(..., help="Output directory of sweeps (holds trials/ and stages/)."),
    sweep_id: Optional[str] = typer.Option(None, help="Only this sweep."),
    wait: bool = typer.Option(False, "--wait", help="Wait for sinks still writing there instead of failing."),
) -> None:
    """Merge each sweep's part files into a few, crash-safe (every sweep does this at its end).

    Also converts a run written before the rolled layout (one file per attempt) and rebuilds a
    missing resume index. Prints, per sweep, the files before and after.
    """
    from reb_ray.results.compact import compact as run_compact

    typer.echo(run_compact(run_dir, sweep_id, blocking=wait).describe())
