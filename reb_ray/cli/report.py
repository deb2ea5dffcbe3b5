"""`reb-ray report RUN_DIR [--sweep-id ID] [--csv FILE|-] [--html FILE] [--tasks-root DIR]`: the summary and analysis of a results directory."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def report(
    run_dir: Path = typer.Argument(..., help="Output directory of sweeps (holds trials/)."),
    sweep_id: Optional[str] = typer.Option(None, help="Only this sweep."),
    csv_path: Optional[Path] = typer.Option(None, "--csv", help="Also write the paper-compatible CSV (the release's master_summary.csv columns, then ours); '-' prints it instead of the table."),
    tasks_root: Optional[Path] = typer.Option(None, "--tasks-root", help="Directory holding the run's suites, for the note on stages that deviate from the paper's release (default: the bundled tasks/)."),
    html_path: Optional[Path] = typer.Option(None, "--html", help="Also write the report as one self-contained HTML file: tables, plots, a drill-down per trial (plots need the `plots` extra)."),
) -> None:
    """Per (sweep, agent): the summary table, then success rates with 95% intervals, pass@k,
    paired comparisons, cost per success, findings, failures and the C5 audit.

    The terminal table, the CSV and the HTML show the same numbers (`analysis.scores.summarize`,
    `analysis.sections`); the analysis is computed once for the terminal and the HTML.
    """
    from analysis.analyze import STAGE_COLUMNS, analyze
    from analysis.deviations import run_deviations
    from analysis.paper import to_csv
    from analysis.scores import summarize
    from analysis.summary import format_summary
    from analysis.terminal import format_analysis
    from reb_ray.errors import RebRayError
    from reb_ray.results.read import read_stages, read_trials

    if not (run_dir / "trials").is_dir():
        raise RebRayError(f"{run_dir}: no trials/ dataset here (is it a sweep's --output directory?)")
    trials = read_trials(run_dir, sweep_id)
    trials = _harbor_first(trials)  # Harbor sweeps: their reward table; the rest as below
    if trials is None:
        if csv_path is not None or html_path is not None:
            typer.echo("--csv/--html: not written: they hold the paper's C0..C5 columns, which Harbor trials do not have",
                       err=True)
        return
    rows = summarize(trials)
    if csv_path == Path("-"):
        typer.echo(to_csv(rows), nl=False)
        if html_path is None:
            return
    columns = STAGE_COLUMNS
    if html_path is not None:
        from analysis.report_html import stage_columns

        columns = stage_columns()  # the log heads and tails too, read once for both
    stages = read_stages(run_dir, sweep_id, columns=columns)
    analysis = analyze(trials, stages.select(STAGE_COLUMNS), deviations=run_deviations(run_dir, trials, tasks_root))
    if csv_path != Path("-"):
        typer.echo(format_summary(rows, trials) + "\n\n" + format_analysis(analysis))
    if csv_path is not None and csv_path != Path("-"):
        try:
            csv_path.write_text(to_csv(rows))
        except OSError as exc:
            raise RebRayError(f"--csv {csv_path}: cannot write: {exc.strerror or exc}") from exc
        typer.echo(f"wrote {csv_path}")
    if html_path is not None:
        from analysis.report_html import write_html

        write_html(run_dir, html_path, sweep_id, trials=trials, stages=stages, analysis=analysis)
        typer.echo(f"wrote {html_path}", err=csv_path == Path("-"))  # stdout holds only the CSV then


def _harbor_first(trials):
    """Print the reward table of the Harbor sweeps among `trials` (analysis.rewards: mean reward
    per agent with its interval beside time and cost; C0..C5 do not apply to them) and return
    the other trials, or None when every trial was a Harbor one."""
    import pyarrow.compute as pc

    from analysis.rewards import format_rewards, harbor_rows, reward_summary

    harbor = harbor_rows(trials)
    if not harbor.num_rows:
        return trials
    typer.echo(format_rewards(reward_summary(harbor)))
    if harbor.num_rows == trials.num_rows:
        return None
    typer.echo("")
    ids = pc.is_in(trials.column("sweep_id"), value_set=pc.unique(harbor.column("sweep_id")))
    return trials.filter(pc.invert(ids))
