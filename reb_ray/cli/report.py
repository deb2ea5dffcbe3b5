"""`reb-ray report RUN_DIR [--csv FILE]`: the paper-compatible summary of a results directory."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def report(
    run_dir: Path = typer.Argument(..., help="Output directory of sweeps (holds trials/)."),
    sweep_id: Optional[str] = typer.Option(None, help="Only this sweep."),
    csv_path: Optional[Path] = typer.Option(None, "--csv", help="Also write the summary as CSV (release column names)."),
) -> None:
    """Per (sweep, agent): C0 missing/total, C1-C4 success/denominator, C5 sums, time, env size."""
    from analysis.paper import paper_summary, to_csv
    from reb_ray.errors import RebRayError
    from reb_ray.results.read import read_trials

    if not (run_dir / "trials").is_dir():
        raise RebRayError(f"{run_dir}: no trials/ dataset here (is it a sweep's --output directory?)")
    text = to_csv(paper_summary(read_trials(run_dir, sweep_id)))
    typer.echo(text, nl=False)
    if csv_path is not None:
        csv_path.write_text(text)
