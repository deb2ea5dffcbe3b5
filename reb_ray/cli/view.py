"""`reb-ray view OUTPUT`: browse a results directory in a local web viewer; and
`reb-ray export-trajectories OUTPUT DIR`: every trial's trajectory as ATIF files."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def view(
    run_dir: Path = typer.Argument(..., help="Output directory of sweeps (holds trials/); a running sweep's too."),
    port: int = typer.Option(8765, "--port", help="TCP port to listen on."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (default: this machine only)."),
) -> None:
    """Serve a local web viewer of the run: the paper's table with intervals, an agent x task
    matrix coloured by the highest stage reached (filters, paging), each trial's stages, report,
    C5 audit, trajectory and full logs, and two agents side by side. Reads the Parquet datasets
    in place, a few columns or row groups at a time; new rows show at the next page load."""
    from reb_ray.results.layout import TRIALS_DIR
    from reb_ray.viewer.summary import launch

    # the paper table's child starts first: its start-up overlaps the server's imports
    early = launch(run_dir) if (Path(run_dir) / TRIALS_DIR).is_dir() else None
    try:
        from reb_ray.viewer.server import serve

        serve(run_dir, host=host, port=port, announce=typer.echo, early_summary=early)
    finally:
        if early is not None and early.poll() is None:
            early.kill()
            early.wait()


def export_trajectories(
    run_dir: Path = typer.Argument(..., help="Output directory of sweeps (holds trials/)."),
    dest: Path = typer.Argument(..., help="Directory to write <sweep>/<trial>/<attempt>/trajectory.json under."),
    sweep_id: Optional[str] = typer.Option(None, help="Only this sweep."),
) -> None:
    """Write every trial's current attempt as an ATIF trajectory (Agent Trajectory Interchange
    Format v1.7), built from its transcript and the LLM proxy's request log, for other tools."""
    from reb_ray.viewer.trajectories import export

    written, problems = export(run_dir, dest, sweep_id)
    for line in problems:
        typer.echo(f"warning: {line}", err=True)
    typer.echo(f"{written} trajectories written under {dest}")
