"""What a sweep's W&B run shows beyond its rows: each agent's summary metrics (the numbers
`reb-ray report` prints) and the analysis plots. The CLI hands `summary_and_plots` to
`run_sweep`, so the sweep itself never imports the analysis."""

from __future__ import annotations

import logging
from pathlib import Path

from reb_ray.errors import RebRayError

log = logging.getLogger(__name__)


def summary_and_plots(output: Path, sweep_id: str, out_dir: Path) -> tuple[dict, dict]:
    """({"<agent>/<metric>": number}, {plot name: PNG path}) of the sweep's rows under `output`;
    empty when no rows can be read yet (the W&B run still finishes)."""
    from analysis.scores import summarize
    from reb_ray.results.read import read_trials

    summary: dict = {}
    trials = None
    try:
        trials = read_trials(output, sweep_id)
        for row in summarize(trials):
            for key, value in row.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    summary[f"{row['agent']}/{key}"] = value
    except RebRayError as exc:  # no rows yet: the run still finishes
        log.warning("W&B summary skipped: %s", exc)
    plots = _plots(output, sweep_id, trials, out_dir) if trials is not None and trials.num_rows else {}
    return summary, plots


def _plots(output: Path, sweep_id: str, trials, out_dir) -> dict:
    """{plot name: PNG path} of the sweep's analysis plots (analysis/plots.py), drawn under
    `out_dir`; empty, with a warning, when matplotlib is missing or the stages are unreadable."""
    from analysis.analyze import STAGE_COLUMNS, analyze
    from analysis.plots import PLOTS, plot_path, write_plots
    from reb_ray.results.read import read_stages

    try:
        analysis = analyze(trials, read_stages(output, sweep_id, columns=STAGE_COLUMNS))
        write_plots(analysis, Path(out_dir))
    except Exception as exc:  # noqa: BLE001  the plots are extra: they never fail a sweep whose rows are written
        log.warning("W&B plots skipped: %s: %s", type(exc).__name__, exc)
        return {}
    paths = {plot: plot_path(Path(out_dir), sweep_id, plot) for plot in PLOTS}
    return {plot: path for plot, path in paths.items() if path.is_file()}


