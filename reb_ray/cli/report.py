"""`reb-ray report RUN_DIR [--sweep-id ID] [--csv FILE|-] [--html FILE] [--tasks-root DIR]`: the summary and analysis of a results directory.

The terminal table, the CSV and the HTML show the same numbers (`analysis.scores.summarize`,
`analysis.sections`, `analysis.rewards.reward_summary`); the analysis is computed once for the
terminal and the HTML. The CSV of Harbor sweeps (`analysis.rewards_csv`) has other columns than
the paper's, whose tooling reads that file by its columns: with both kinds of sweep it is a
second file beside the paper's, never rows mixed into it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def report(
    run_dir: Path = typer.Argument(..., help="Output directory of sweeps (holds trials/)."),
    sweep_id: Optional[str] = typer.Option(None, help="Only this sweep."),
    csv_path: Optional[Path] = typer.Option(None, "--csv", help="Also write the paper-compatible CSV (the release's master_summary.csv columns, then ours); '-' prints it instead of the table. Harbor sweeps' reward table (one line per agent, exact numbers) goes to FILE when the run has only Harbor sweeps, else beside it as FILE-rewards (summary.csv -> summary-rewards.csv); with '-' it is printed for a run of Harbor sweeps only, else the paper's CSV alone."),
    tasks_root: Optional[Path] = typer.Option(None, "--tasks-root", help="Directory holding the run's suites, for the note on stages that deviate from the paper's release (default: the bundled tasks/)."),
    html_path: Optional[Path] = typer.Option(None, "--html", help="Also write the report as one self-contained HTML file: tables, plots, a drill-down per trial (plots need the `plots` extra); a Harbor sweep as its reward table."),
) -> None:
    """Per (sweep, agent): the summary table, then success rates with 95% intervals, pass@k,
    paired comparisons, cost per success, findings, failures and the C5 audit. A Harbor sweep
    (C0..C5 do not apply) shows its reward table instead: mean reward per agent with a 95%
    interval, time, cost and failures. The terminal, the CSV and the HTML show the same numbers.
    """
    from analysis.analyze import STAGE_COLUMNS, analyze
    from analysis.deviations import run_deviations
    from analysis.paper import to_csv
    from analysis.rewards import format_rewards, reward_summary, split_harbor
    from analysis.rewards_csv import rewards_csv, rewards_path
    from analysis.scores import summarize
    from analysis.summary import format_summary
    from analysis.terminal import format_analysis
    from reb_ray.errors import RebRayError
    from reb_ray.results.read import read_stages, read_trials

    if not (run_dir / "trials").is_dir():
        raise RebRayError(f"{run_dir}: no trials/ dataset here (is it a sweep's --output directory?)")
    everything = read_trials(run_dir, sweep_id)
    harbor, trials = split_harbor(everything)  # Harbor sweeps: their reward table; the rest as below
    rewards = reward_summary(harbor)
    to_stdout = csv_path == Path("-")
    if rewards and not to_stdout:
        typer.echo(format_rewards(rewards) + ("\n" if trials.num_rows else ""))
    files: dict[Path, str] = {}  # what --csv writes, in order
    if not trials.num_rows and rewards:  # only Harbor sweeps: the reward table is the run's CSV
        if to_stdout:
            typer.echo(rewards_csv(rewards), nl=False)
        elif csv_path is not None:
            files[csv_path] = rewards_csv(rewards)
        _write_csv(files)
        if html_path is not None:
            from analysis.report_html import write_html

            write_html(run_dir, html_path, sweep_id, trials=everything, rewards=rewards, tasks_root=tasks_root)
            typer.echo(f"wrote {html_path}", err=to_stdout)
        return
    rows = summarize(trials)
    if to_stdout:
        typer.echo(to_csv(rows), nl=False)
        if rewards:
            typer.echo("--csv -: the Harbor sweeps' reward table is not in it (other columns); --csv FILE writes it "
                       "beside FILE", err=True)
        if html_path is None:
            return
    elif csv_path is not None:
        files[csv_path] = to_csv(rows)
        if rewards:
            files[rewards_path(csv_path)] = rewards_csv(rewards)
    columns = STAGE_COLUMNS
    if html_path is not None:
        from analysis.report_html import stage_columns

        columns = stage_columns()  # the log heads and tails too, read once for both
    stages = read_stages(run_dir, sweep_id, columns=columns)
    analysis = analyze(trials, stages.select(STAGE_COLUMNS), deviations=run_deviations(run_dir, trials, tasks_root))
    if not to_stdout:
        typer.echo(format_summary(rows, trials) + "\n\n" + format_analysis(analysis))
    _write_csv(files)
    if html_path is not None:
        from analysis.report_html import write_html

        write_html(run_dir, html_path, sweep_id, trials=everything, stages=stages, analysis=analysis, rewards=rewards)
        typer.echo(f"wrote {html_path}", err=to_stdout)  # stdout holds only the CSV then


def _write_csv(files: dict[Path, str]) -> None:
    """Write each CSV text to its path and say so; when one cannot be written, the ones this
    call wrote before it are removed (no half of a report left behind) and the error names it."""
    from reb_ray.errors import RebRayError

    written: list[Path] = []
    for path, text in files.items():
        try:
            path.write_text(text)
        except OSError as exc:
            for done in written:
                done.unlink(missing_ok=True)
            raise RebRayError(f"--csv {path}: cannot write: {exc.strerror or exc}") from exc
        written.append(path)
    for path in written:
        typer.echo(f"wrote {path}")
