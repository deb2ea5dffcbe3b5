"""`reb-ray trial show RUN TRIAL_ID`: what one trial did, from its rows and stored artifacts."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="One trial: what the agent did, read back from a sweep's output.")


@app.command("show")
def show(
    run_dir: Path = typer.Argument(..., help="Output directory of sweeps (holds trials/)."),
    trial_id: str = typer.Argument(..., help="The trial id, <agent>/<task_id>/<trial_index> (the trials row's trial_id)."),
    sweep_id: Optional[str] = typer.Option(None, help="The sweep, when the directory holds the trial in several."),
    attempt: Optional[int] = typer.Option(None, help="This attempt (default: the one that counts: the last scored, else the last)."),
) -> None:
    """Print the trial's status, attempts, agent, LLM requests, tokens and cost, the commands it
    ran with their exit codes, its report, what its interpreter is (ELF or script), start-up hooks,
    suspicious actions, and its stage results."""
    from reb_ray.errors import RebRayError
    from analysis.trial_view import show_trial

    if not (run_dir / "trials").is_dir():
        raise RebRayError(f"{run_dir}: no trials/ dataset here (is it a sweep's --output directory?)")
    typer.echo(show_trial(run_dir, trial_id, sweep_id, attempt))
