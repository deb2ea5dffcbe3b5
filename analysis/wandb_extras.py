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
    empty when no rows can be read yet (the W&B run still finishes). A sweep of Harbor tasks
    has its reward table's numbers instead (`reward_metrics`) and no plots: C0..C5 do not apply."""
    from analysis.rewards import split_harbor
    from analysis.scores import summarize
    from reb_ray.results.read import read_trials

    summary: dict = {}
    trials = None
    try:
        trials = read_trials(output, sweep_id)
        harbor, trials = split_harbor(trials)
        summary.update(reward_metrics(harbor))
        for row in summarize(trials) if trials.num_rows else []:
            for key, value in row.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    summary[f"{row['agent']}/{key}"] = value
    except RebRayError as exc:  # no rows yet: the run still finishes
        log.warning("W&B summary skipped: %s", exc)
    plots = _plots(output, sweep_id, trials, out_dir) if trials is not None and trials.num_rows else {}
    return summary, plots


def reward_metrics(harbor) -> dict:
    """{"<agent>/<metric>": number} of Harbor trials (`analysis.rewards.reward_summary`): trials,
    rewarded, mean_reward and its bootstrap interval (mean_reward_low, mean_reward_high), agent_s,
    cost_usd, the failures by owner, and reward_<key> per metric; an unknown value is left out
    (W&B has no null), never written as 0."""
    from analysis.rewards import reward_summary

    out: dict = {}
    for row in reward_summary(harbor) if harbor.num_rows else []:
        low, high = row["interval"] or (None, None)
        values = {"trials": row["trials"], "rewarded": row["rewarded"], "mean_reward": row["mean_reward"],
                  "mean_reward_low": low, "mean_reward_high": high, "agent_s": row["agent_s"],
                  "cost_usd": row["cost_usd"], "failed_agent": row["failed_agent"],
                  "failed_hardware": row["failed_hardware"], "infra": row["infra"],
                  **{f"reward_{key}": value for key, value in row["metrics"].items()}}
        out.update({f"{row['agent']}/{key}": value for key, value in values.items() if value is not None})
    return out


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


