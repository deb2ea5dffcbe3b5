"""`reb-ray regrade RUN_DIR`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def regrade(
    run_dir: Path = typer.Argument(..., help="Output directory of a sweep (holds trials/ and stages/)."),
    sweep_id: Optional[str] = typer.Option(None, help="Only this sweep."),
    tasks_root: Optional[Path] = typer.Option(None, help="Directory holding suites (default: bundled)."),
) -> None:
    """Recompute stage results and C5 from stored raw probe outputs; write them as a new sweep."""
    from analysis.summary import format_summary, summarize
    from reb_ray.sweep.regrade import regrade as run_regrade
    from reb_ray.results.compact import compact_if_idle
    from reb_ray.results.parquet_sink import ParquetSink
    from reb_ray.results.read import read_trials

    from reb_ray.errors import RebRayError

    if not (run_dir / "trials").is_dir():
        raise RebRayError(f"{run_dir}: no trials/ dataset here (is it a sweep's --output directory?)")
    outcomes = run_regrade(run_dir, sweep_id, tasks_root)
    with ParquetSink(run_dir) as sink:
        for outcome in outcomes:
            sink.write([outcome.trial], outcome.stages)
    new_ids = sorted({o.trial["sweep_id"] for o in outcomes})
    for new_id in new_ids:
        compact_if_idle(run_dir, new_id)
    typer.echo(f"re-graded {len(outcomes)} trial(s) into sweep(s) {', '.join(new_ids) or '-'}")
    for new_id in new_ids:
        typer.echo(format_summary(summarize(read_trials(run_dir, new_id))))
