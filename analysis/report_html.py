"""`reb-ray report RUN --html FILE`: the run's report as one self-contained HTML file (no
script, no network: it opens anywhere and cannot run what an agent wrote).

It holds, per reb-ray sweep: any `FINDING:` first, the per-agent summary table (`analysis.summary`'s
cells: the numbers the terminal and the CSV show, from the one `analysis.scores.summarize`),
the plots (`analysis.plots`, embedded as base64 PNG data URIs), the analysis sections
(`analysis.sections`: the terminal's strings, as tables) and a drill-down per trial
(`analysis.drilldown`: stage statuses and reasons, log head and tail, report.json, tokens and
cost, relative links to the stored agent log, transcript and stage logs). A Harbor sweep
(`reb-ray sweep --suite harbor:PATH`; C0..C5 do not apply to it) is one section of its reward
table (`analysis.rewards_page`: the terminal's numbers, cost to the cent, time with units) and a
link to the viewer, which opens its trials, logs and trajectories.

The report is for small runs; a large one (or one still running) is browsed with the viewer,
`reb-ray view OUTPUT`: the report names that command for its results directory and links each
sweep to the viewer's matrix at the default address (VIEWER_URL, live once the command runs).
Stages no task of a sweep applies (no agent has an applicable trial of them: a CPU-only suite's
C2..C4) are left out of that sweep's tables and trial badges, not shown as columns of "-".

Self-contained and inert: no script, no external resource (no CDN, no font, no fetch), and a
Content-Security-Policy (`CSP`) that forbids both, so the file can be mailed or archived and
opened anywhere. Every value is escaped by the template (jinja2 autoescape on, never `|safe`),
and terminal control and bidirectional-override characters are shown as escapes
(`reb_ray.terminal.printable`): a `<script>` an agent wrote in a log or a reason is text.
"""

from __future__ import annotations

import base64
import re
import shlex
import tempfile
from urllib.parse import urlencode
from pathlib import Path
from typing import Any

import pyarrow as pa

import reb_ray
from reb_ray.errors import RebRayError
from reb_ray.terminal import printable

from .analyze import STAGE_COLUMNS, Analysis, analyze
from .drilldown import DETAIL_COLUMNS, trial_details
from .outcomes import LABELS, STAGES
from .rewards import reward_summary, split_harbor
from .rewards_page import LEGEND as REWARDS_LEGEND, page_sweeps
from .scores import summarize
from .sections import sweep_sections
from .summary import HEADERS, LEGEND, row_cells

TEMPLATES = Path(__file__).resolve().parent / "templates"
TEMPLATE = "report.html.j2"
#: No script runs and nothing is fetched; images only from data: URIs, styles only inline.
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
#: Where `reb-ray view` serves by default (reb_ray.cli.view: 127.0.0.1, port 8765).
VIEWER_URL = "http://127.0.0.1:8765"
#: Stages that apply to every task (C0: every repository; C5: every report) and are never left out.
ALWAYS = ("c0", "c5")


def applied_stages(analysis: Analysis, sweep_id) -> list[str]:
    """The stages of STAGES some task of the sweep applies: C0 and C5 always, C1..C4 when some
    agent has a scored trial on a task that applies it."""
    agents = analysis.stats.run.agents(sweep_id)
    applied = []
    for stage in STAGES:
        try:
            used = any(analysis.stats.stage(sweep_id, agent, stage).tasks > 0 for agent in agents)
        except KeyError:
            used = False
        if stage in ALWAYS or used:
            applied.append(stage)
    return applied


def _mentions(text: str, labels: list[str]) -> bool:
    return any(re.search(rf"(?<![A-Za-z0-9]){re.escape(label)}(?![0-9])", text) for label in labels)


def without_stages(headers: list[str], rows: list[list[str]], labels: list[str]) -> tuple[list[str], list[list[str]]]:
    """`headers` and `rows` without the columns whose header names one of `labels` (C2, $/C2 ok, ...)."""
    keep = [i for i, h in enumerate(headers) if not _mentions(h, labels)]
    return [headers[i] for i in keep], [[row[i] for i in keep if i < len(row)] for row in rows]


def _section_without(section: Any, labels: list[str]) -> Any:
    """A section with the stages of `labels` left out: its table columns, or its lines about them."""
    import dataclasses

    if not labels:
        return section
    if section.headers:
        headers, rows = without_stages(section.headers, section.rows, labels)
        return dataclasses.replace(section, headers=headers, rows=rows)
    if section.key in ("comparisons", "frontiers"):
        return dataclasses.replace(section, lines=[x for x in section.lines if not _mentions(x, labels)])
    return section


def _environment() -> Any:
    try:
        import jinja2
    except ImportError as exc:  # a dependency of reb-ray; only a broken install lacks it
        raise RebRayError("--html needs jinja2: pip install jinja2") from exc
    # finalize: every {{ value }} goes through printable before it is escaped
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                              undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                              finalize=lambda v: printable(v) if isinstance(v, str) else v)


def plot_images(analysis: Analysis) -> tuple[dict[Any, list[dict]], str | None]:
    """({sweep_id: [{"name", "plot", "data" (base64 PNG)}]}, None), or ({}, why not) when
    matplotlib is missing: `analysis.plots.write_plots`' PNGs, drawn in a temporary directory."""
    try:
        from .plots import PLOTS, plot_path, write_plots

        with tempfile.TemporaryDirectory(prefix="reb-ray-plots-") as tmp:
            write_plots(analysis, Path(tmp))
            images: dict[Any, list[dict]] = {}
            for sweep_id in analysis.stats.run.sweeps():
                for plot in PLOTS:
                    path = plot_path(Path(tmp), sweep_id, plot)
                    if path.is_file():
                        images.setdefault(sweep_id, []).append(
                            {"name": path.name, "plot": plot, "data": base64.b64encode(path.read_bytes()).decode("ascii")})
    except RebRayError as exc:
        return {}, str(exc)
    return images, None


def _viewer(sweep_id) -> str:
    return f"{VIEWER_URL}/matrix?{urlencode({'sweep': sweep_id})}" if sweep_id is not None else VIEWER_URL


def context(output_dir: Path, trials: pa.Table, stages: pa.Table | None, analysis: Analysis,
            html_path: Path, *, with_plots: bool = True, rewards: list[dict] | None = None) -> dict:
    """The template's values: one dict per reb-ray sweep of `trials` (id, summary headers and
    rows, legend, sections, plots, trials), one per Harbor sweep of `rewards` (its
    `analysis.rewards.reward_summary` rows: id, suite, headers, rows, viewer link) and the run's
    facts. `stages`: the stages table with DETAIL_COLUMNS (None: no drill-down of stages)."""
    images, plots_note = plot_images(analysis) if with_plots else ({}, "plots not drawn (with_plots=False)")
    rows = summarize(trials)
    details = trial_details(output_dir, trials, stages, analysis.stats.run, html_path.parent)
    sweeps = []
    for sweep_id in sorted({r["run_id"] for r in rows}, key=lambda s: (s is None, s or "")):
        applied = applied_stages(analysis, sweep_id)
        omitted = [LABELS[s] for s in STAGES if s not in applied]
        headers, cells = without_stages(list(HEADERS), [row_cells(r) for r in rows if r["run_id"] == sweep_id], omitted)
        sweeps.append({
            "id": sweep_id,
            "headers": headers,
            "rows": cells,
            "sections": [_section_without(x, omitted) for x in sweep_sections(analysis, sweep_id)],
            "plots": images.get(sweep_id, []),
            "trials": [d for d in details if d["sweep_id"] == sweep_id],
            "stages": applied,
            "omitted": omitted,
            "viewer": _viewer(sweep_id),
        })
    harbor = [{**sweep, "viewer": _viewer(sweep["id"])} for sweep in page_sweeps(rewards or [])]
    return {"title": f"reb-ray report: {output_dir.name}", "output_dir": str(output_dir), "version": reb_ray.__version__,
            "view_command": f"reb-ray view {shlex.quote(str(output_dir))}", "viewer_url": VIEWER_URL,
            "csp": CSP, "legend": LEGEND, "sweeps": sweeps, "harbor_sweeps": harbor, "rewards_legend": REWARDS_LEGEND, "plots_note": plots_note, "stages": STAGES,
            "labels": LABELS, "seed": analysis.seed, "resamples": analysis.resamples}


def render(output_dir: Path, trials: pa.Table, stages: pa.Table | None, analysis: Analysis, html_path: Path,
           *, with_plots: bool = True, rewards: list[dict] | None = None) -> str:
    """The HTML text of the report (`context` rendered by TEMPLATE)."""
    return _environment().get_template(TEMPLATE).render(
        **context(Path(output_dir), trials, stages, analysis, Path(html_path), with_plots=with_plots, rewards=rewards))


def stage_columns() -> list[str]:
    """The stages columns the HTML report reads: the analysis' and the drill-down's."""
    return list(dict.fromkeys(STAGE_COLUMNS + DETAIL_COLUMNS))


def write_html(output_dir: Path, html_path: Path, sweep_id: str | None = None, *, trials: pa.Table | None = None,
               stages: pa.Table | None = None, analysis: Analysis | None = None, with_plots: bool = True,
               tasks_root: Path | None = None, rewards: list[dict] | None = None) -> Path:
    """Write the HTML report of the run under `output_dir` (one sweep or all) to `html_path`
    (UTF-8); returns the path. What is already at hand is not read or computed again: `trials`
    (every attempt, as read_trials gives it, Harbor sweeps included), `stages`
    (`stage_columns()` at least), `analysis` (`analyze` of the trials that are not Harbor ones
    and the stages, with the deviations of the tasks under `tasks_root`, default the bundled
    tasks/) and `rewards` (`reward_summary` of the Harbor ones). Raises RebRayError for an
    unreadable results shard or an unwritable file."""
    from reb_ray.results.read import read_stages, read_trials

    output_dir, html_path = Path(output_dir), Path(html_path)
    if trials is None:
        trials = read_trials(output_dir, sweep_id)
    harbor, trials = split_harbor(trials)  # a Harbor sweep has its reward table, not C0..C5
    if rewards is None:
        rewards = reward_summary(harbor)
    if stages is None:
        stages = read_stages(output_dir, sweep_id, columns=stage_columns())
    if analysis is None:
        from .deviations import run_deviations

        analysis = analyze(trials, stages.select(STAGE_COLUMNS), deviations=run_deviations(output_dir, trials, tasks_root))
    text = render(output_dir, trials, stages, analysis, html_path, with_plots=with_plots, rewards=rewards)
    try:
        html_path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise RebRayError(f"--html {html_path}: cannot write: {exc.strerror or exc}") from exc
    return html_path
