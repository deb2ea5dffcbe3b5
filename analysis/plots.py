"""Plots of an analysed run, PNG via matplotlib's Agg backend (no display).

Per sweep, four figures, each a function returning a matplotlib Figure (so its numbers can be
checked) and written by `write_plots` under deterministic names (`plot_path`):

- `pyramid`: success rate per stage C1..C4 and C5 per agent, bars with their 95% intervals
  (`analysis.statistics`; error bars span the interval).
- `cost_success`: mean cost per trial (USD; tokens per trial where no agent is priced) against
  success rate, one panel per stage C1..C4, the Pareto frontier drawn as a step line
  (`analysis.cost`); agents with unknown cost are named in the panel, not plotted at 0.
- `failures`: non-successes per agent stacked by category over all stages C0..C5
  (`analysis.failures`), owner in the legend label.
- `heatmap`: agent x task, the highest stage C1..C4 that succeeded, averaged over the agent's
  trials of the task (0: none did; blank: the agent has no scored trial of the task).

Two more for the viewer's pages (reb_ray.viewer.pictures): `spend_distributions` (agent time
and tokens per trial, one box per agent) and `paired_differences` (two agents' paired success
differences per stage, for the compare page).

matplotlib is an optional dependency (`pip install 'reb-ray[plots]'`); without it the
functions raise RebRayError saying so. The PNG files carry no software version or date, so the
same analysis and matplotlib version give the same bytes.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from reb_ray.errors import RebRayError

from .analyze import Analysis
from .outcomes import LABELS, OUTCOME, STAGES, sort_key

PLOTS = ("pyramid", "cost_success", "failures", "heatmap")
PYRAMID_STAGES = ("c1", "c2", "c3", "c4", "c5")
FRONTIER_STAGES = ("c1", "c2", "c3", "c4")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as exc:
        raise RebRayError("plots need matplotlib: pip install 'reb-ray[plots]'") from exc
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def plot_path(out_dir: Path, sweep_id: str | None, plot: str) -> Path:
    """`out_dir/<sweep>-<plot>.png`: the sweep id with characters outside [A-Za-z0-9._-] as
    "_" and, when that changed it, 8 hex digits of its SHA-256 appended (distinct sweeps never
    share a name). Raises ValueError for a plot not in PLOTS."""
    if plot not in PLOTS:
        raise ValueError(f"unknown plot {plot!r}: expected one of {', '.join(PLOTS)}")
    raw = "none" if sweep_id is None else sweep_id
    safe = _UNSAFE.sub("_", raw)[:100] or "_"
    if safe != raw:
        safe += "-" + hashlib.sha256(raw.encode()).hexdigest()[:8]
    return Path(out_dir) / f"{safe}-{plot}.png"


def _agents(a: Analysis, sweep_id) -> list:
    return [agent for agent in a.stats.run.agents(sweep_id) if a.stats.run.has_scored((sweep_id, agent))]


def pyramid(a: Analysis, sweep_id) -> Any:
    """Grouped bars: x = stage, one bar per agent, height = success rate, error bar = the 95%
    interval. A stage with no applicable trial for an agent has no bar."""
    plt = _pyplot()
    agents = _agents(a, sweep_id)
    fig, ax = plt.subplots(figsize=(2 + 1.6 * len(PYRAMID_STAGES), 4.5))
    width = 0.8 / max(1, len(agents))
    for i, agent in enumerate(agents):
        xs, heights, low, high = [], [], [], []
        for j, stage in enumerate(PYRAMID_STAGES):
            s = a.stats.stage(sweep_id, agent, stage)
            if s.rate is None:
                continue
            xs.append(j - 0.4 + width * (i + 0.5))
            heights.append(s.rate)
            low.append(s.rate - s.interval.low)
            high.append(s.interval.high - s.rate)
        ax.bar(xs, heights, width, yerr=[low, high], capsize=3, label=str(agent))
    ax.set_xticks(range(len(PYRAMID_STAGES)), [LABELS[s] for s in PYRAMID_STAGES])
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("success rate (95% interval)")
    ax.set_title(f"sweep {sweep_id}: success per stage")
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def _spend(a: Analysis, sweep_id) -> tuple[str, dict]:
    costs = [c for c in a.costs if c.sweep_id == sweep_id]
    if any(c.cost_per_trial is not None for c in costs):
        return "cost_usd", {c.agent: c.cost_per_trial for c in costs}
    return "tokens", {c.agent: c.tokens_per_trial for c in costs}


def _applied_stages(a: Analysis, sweep_id) -> list[str]:
    """The frontier stages some agent of the sweep has a rate for (a stage no task applies to
    has none): an empty panel says nothing, so it is not drawn. At least C1, so a sweep of
    unknowns still gets a figure."""
    agents = _agents(a, sweep_id)
    stages = [stage for stage in FRONTIER_STAGES
              if any(a.stats.stage(sweep_id, agent, stage).rate is not None for agent in agents)]
    return stages or list(FRONTIER_STAGES[:1])


def _point_labels(known: list[tuple[Any, float, float]]) -> list[tuple[str, float, float]]:
    """One label per drawn point: agents at the same (x, y) share it ("a, b"), so their names
    are never drawn on top of each other."""
    at: dict[tuple[float, float], list[str]] = {}
    for agent, x, y in known:
        at.setdefault((round(x, 12), round(y, 12)), []).append(str(agent))
    return [(", ".join(names), x, y) for (x, y), names in at.items()]


def cost_success(a: Analysis, sweep_id) -> Any:
    """One panel per stage C1..C4 that some task applies: x = mean cost per trial (USD, or
    tokens per trial when no agent of the sweep is priced), y = success rate; the frontier's
    agents joined by a step line; unknown-cost agents listed in the panel. Agents sharing a
    point share one label; a label turns left of its point in the right half of the panel and
    below it near the top, and the x range leaves room for it, so no label leaves the axes."""
    plt = _pyplot()
    metric, spend = _spend(a, sweep_id)
    stages = _applied_stages(a, sweep_id)
    fig, axes = plt.subplots(1, len(stages), figsize=(4 * len(stages), 4), squeeze=False)
    for ax, stage in zip(axes[0], stages):
        frontier = next(f for f in a.frontiers if (f.sweep_id, f.stage, f.metric) == (sweep_id, stage, metric))
        known = [(agent, spend[agent], a.stats.stage(sweep_id, agent, stage).rate) for agent in _agents(a, sweep_id)
                 if spend.get(agent) is not None and a.stats.stage(sweep_id, agent, stage).rate is not None]
        right = max((x for _, x, _ in known), default=0.0) or 1.0
        for agent, x, y in known:
            ax.scatter([x], [y], zorder=3)
        for label, x, y in _point_labels(known):
            left = x > right / 2
            low = y > 0.9
            ax.annotate(label, (x, y), textcoords="offset points", xytext=(-4 if left else 4, -4 if low else 4),
                        ha="right" if left else "left", va="top" if low else "bottom", fontsize="small",
                        annotation_clip=True)
        front = [(spend[agent], a.stats.stage(sweep_id, agent, stage).rate) for agent in frontier.agents]
        if front:
            ax.step([x for x, _ in front], [y for _, y in front], where="post", linestyle="--", color="grey",
                    marker="s", markerfacecolor="none", markersize=11, label="Pareto frontier")
            ax.legend(fontsize="small", loc="lower right")
        if frontier.unknown:
            ax.text(0.02, 0.98, "unknown: " + ", ".join(map(str, frontier.unknown)), transform=ax.transAxes,
                    va="top", fontsize="small")
        ax.set_title(f"{LABELS[stage]}")
        ax.set_xlabel("USD per trial" if metric == "cost_usd" else "tokens per trial")
        ax.set_ylim(-0.02, 1.05)
        ax.set_xlim(left=-0.05 * right, right=right * 1.15)
    axes[0][0].set_ylabel("success rate")
    fig.suptitle(f"sweep {sweep_id}: cost vs success")
    fig.tight_layout()
    return fig


def failures(a: Analysis, sweep_id) -> Any:
    """Stacked bars, one per agent: its non-successes over C0..C5 by category (owner in the
    label), largest categories at the bottom."""
    plt = _pyplot()
    agents = [str(x) for x in _agents(a, sweep_id)]
    totals: dict[tuple, dict[str, int]] = {}
    for f in a.failures:
        if f.sweep_id == sweep_id:
            totals.setdefault((f.owner, f.category), {}).setdefault(str(f.agent), 0)
            totals[(f.owner, f.category)][str(f.agent)] += f.trials
    order = sorted(totals, key=lambda k: (-sum(totals[k].values()), k))
    # room for the legend beside the bars and a title that is not clipped with few agents
    fig, ax = plt.subplots(figsize=(4.5 + 1.2 * len(agents), 4.5))
    bottom = [0] * len(agents)
    for owner, category in order:
        heights = [totals[(owner, category)].get(agent, 0) for agent in agents]
        ax.bar(agents, heights, bottom=bottom, label=f"{category} ({owner})")
        bottom = [b + h for b, h in zip(bottom, heights)]
    ax.set_ylabel("stages not succeeded (C0..C5, trials)")
    ax.set_title(f"sweep {sweep_id}: failures by category")
    if order:
        ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return fig


def highest_stages(a: Analysis, sweep_id) -> tuple[list, list, list[list[float | None]]]:
    """(agents, tasks, values): values[i][j] = the mean over agent i's trials of task j of the
    highest stage number 1..4 whose outcome was success (0 when none), None when the agent has
    no scored trial of the task."""
    agents = _agents(a, sweep_id)
    levels: dict[tuple, list[int]] = {}
    for agent in agents:
        for row in a.stats.run.trials.get((sweep_id, agent), []):
            reached = [n for n in range(1, 5) if row[OUTCOME][f"c{n}"] == "success"]
            levels.setdefault((agent, row.get("task_id")), []).append(max(reached, default=0))
    tasks = sorted({t for _, t in levels}, key=lambda t: sort_key((t,)))
    values = [[(sum(v) / len(v)) if (v := levels.get((agent, t))) else None for t in tasks] for agent in agents]
    return agents, tasks, values


def heatmap(a: Analysis, sweep_id) -> Any:
    """Agent x task image of `highest_stages` (0..4), each cell annotated when the grid is
    small enough to read."""
    plt = _pyplot()
    agents, tasks, values = highest_stages(a, sweep_id)
    grid = [[float("nan") if v is None else v for v in row] for row in values]
    fig, ax = plt.subplots(figsize=(min(30, 4 + 0.35 * len(tasks)), 2 + 0.4 * len(agents)))
    image = ax.imshow(grid, vmin=0, vmax=4, cmap="viridis", aspect="auto")
    ax.set_yticks(range(len(agents)), [str(x) for x in agents])
    ax.set_xticks(range(len(tasks)), [str(t) for t in tasks], rotation=90, fontsize="x-small")
    if len(tasks) * len(agents) <= 400:
        for i, row in enumerate(values):
            for j, v in enumerate(row):
                if v is not None:
                    ax.text(j, i, f"{v:.1f}", ha="center", va="center", fontsize="x-small",
                            color="white" if v < 2 else "black")
    fig.colorbar(image, ax=ax, label="highest stage (mean)")
    ax.set_title(f"sweep {sweep_id}: highest stage reached")
    fig.tight_layout()
    return fig


def spend_values(a: Analysis, sweep_id, agent) -> tuple[list[float], list[float]]:
    """(agent-phase wall seconds, tokens = input + output) of each scored current trial of
    `agent` that records them; a trial whose value is unknown is left out, never counted as 0."""
    import pyarrow.compute as pc

    table = a.stats.run.table
    rows = a.stats.run.rows_of((sweep_id, agent))

    def values(name: str) -> list:
        if name not in table.column_names or not len(rows):
            return [None] * len(rows)
        return pc.take(table.column(name), rows).to_pylist()

    seconds = [float(v) for v in values("agent_wall_time_s") if v is not None]
    tokens = [float(i + o) for i, o in zip(values("input_tokens"), values("output_tokens"))
              if i is not None and o is not None]
    return seconds, tokens


def _integer_ticks() -> Any:
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(integer=True)


def spend_distributions(a: Analysis, sweep_id) -> Any:
    """Two panels, one box per agent (whiskers at 1.5 IQR, the mean as a triangle): the agent
    phase's wall time per trial in seconds and its tokens per trial (input + output), over the
    scored current trials that record them; an agent's label gives how many did ("n=")."""
    plt = _pyplot()
    agents = _agents(a, sweep_id)
    data = {agent: spend_values(a, sweep_id, agent) for agent in agents}
    fig, axes = plt.subplots(1, 2, figsize=(11, 1.6 + 0.45 * max(1, len(agents))), squeeze=False)
    for ax, (k, unit) in zip(axes[0], ((0, "agent time per trial (s)"), (1, "tokens per trial (input + output)"))):
        shown = [(agent, data[agent][k]) for agent in agents if data[agent][k]]
        missing = [str(agent) for agent in agents if not data[agent][k]]
        if shown:
            ax.boxplot([v for _, v in shown], vert=False, showmeans=True, widths=0.6)
            ax.set_yticks(range(1, len(shown) + 1), [f"{agent} (n={len(v)})" for agent, v in shown])
            ax.invert_yaxis()  # the first agent on top, as in the tables
        else:
            ax.set_yticks([])
        if missing:
            ax.text(0.99, 0.02, "not recorded: " + ", ".join(missing), transform=ax.transAxes, ha="right",
                    va="bottom", fontsize="small")
        ax.set_xlabel(unit)
        ax.set_xlim(left=0)
        if k == 1:  # whole tokens: agents without an LLM (all 0) would otherwise get ticks at 0.01
            ax.set_xlim(0, max(1.0, ax.get_xlim()[1]))
            ax.xaxis.set_major_locator(_integer_ticks())
    fig.suptitle(f"sweep {sweep_id}: what each trial spent")
    fig.tight_layout()
    return fig


def paired_differences(a: Analysis, sweep_id, agent_a, agent_b) -> Any:
    """One row per stage C0..C5 where both agents have a shared task: the paired difference of
    their per-task success rates (a - b) with its 95% paired task-bootstrap interval
    (`analysis.statistics.compare`), a line at 0, and each row's tasks and McNemar p-value."""
    from .statistics import compare

    plt = _pyplot()
    rows = []
    for stage in STAGES:
        c = compare(a.stats.run, sweep_id, stage, agent_a, agent_b, resamples=a.resamples, seed=a.seed)
        if c.difference is not None:
            rows.append((stage, c))
    fig, ax = plt.subplots(figsize=(9, 1.4 + 0.5 * max(1, len(rows))))
    for y, (stage, c) in enumerate(rows):
        low = c.difference - c.interval.low if c.interval else 0.0
        high = c.interval.high - c.difference if c.interval else 0.0
        ax.errorbar([c.difference], [y], xerr=[[low], [high]], fmt="o", capsize=4, color="C0")
        p = "-" if c.p_value is None else f"{c.p_value:.3g}"
        ax.annotate(f"{c.tasks} task{'' if c.tasks == 1 else 's'}, p={p}", (1.0, y), xycoords=("axes fraction", "data"), xytext=(6, 0),
                    textcoords="offset points", va="center", fontsize="small")
    ax.axvline(0, color="grey", linewidth=1)
    ax.set_yticks(range(len(rows)), [LABELS[stage] for stage, _ in rows])
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(-1.05, 1.05)
    ax.set_xlabel(f"success rate {agent_a} - {agent_b} (per task, 95% paired interval)")
    if not rows:
        ax.text(0.5, 0.5, "no stage where both agents have a shared task", transform=ax.transAxes, ha="center")
    ax.set_title(f"sweep {sweep_id}: {agent_a} vs {agent_b}")
    fig.tight_layout()
    return fig


def write_plots(a: Analysis, out_dir: Path) -> list[Path]:
    """Write every plot of every sweep with a scored trial as PNG under `out_dir` (created),
    named by `plot_path`; returns the paths in sweep then PLOTS order. Raises RebRayError when
    matplotlib is missing or `out_dir` cannot be written."""
    plt = _pyplot()
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RebRayError(f"plots directory {out_dir}: cannot create: {exc.strerror or exc}") from exc
    makers = {"pyramid": pyramid, "cost_success": cost_success, "failures": failures, "heatmap": heatmap}
    written = []
    for sweep_id in a.stats.run.sweeps():
        if not _agents(a, sweep_id):
            continue
        for plot in PLOTS:
            fig = makers[plot](a, sweep_id)
            path = plot_path(out_dir, sweep_id, plot)
            try:
                fig.savefig(path, format="png", dpi=100, metadata={"Software": None})
            except OSError as exc:
                raise RebRayError(f"plot {path}: cannot write: {exc.strerror or exc}") from exc
            finally:
                plt.close(fig)
            written.append(path)
    return written
