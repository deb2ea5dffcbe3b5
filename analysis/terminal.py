"""The terminal report of a run (`reb-ray report RUN`, `python -m analysis RUN`): the per-agent
summary table (`analysis.summary`, the CSV's numbers), then the analysis of each sweep
(`analysis.sections`: success rates with 95% intervals, pass@k, paired comparisons, cost and
efficiency, findings, failures and the C5 audit) laid out as text. It lays out only: every
cell is formatted in `analysis.sections`, the same strings the HTML report shows.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from reb_ray.results.read import read_stages, read_trials

from .analyze import STAGE_COLUMNS, Analysis, analyze
from .columns import table
from .cost import SUCCESS_STAGES
from .deviations import run_deviations
from .scores import summarize
from .sections import RATE_STAGES, Section, sweep_sections
from .summary import format_summary


def _wrap_parts(head: str, parts: list[str], width: int = 110) -> list[str]:
    """`head` then `parts` joined by "; ", broken only between parts, continuation indented."""
    lines, line = [], "  " + head
    for i, part in enumerate(parts):
        piece = part + (";" if i < len(parts) - 1 else "")
        if len(line) + 1 + len(piece) > width and line.strip() != head.strip():
            lines.append(line)
            line = "      " + piece
        else:
            line += ("" if line.endswith(": ") else " ") + piece
    lines.append(line)
    return lines


def render(section: Section) -> str:
    """One section as text: a table under its head (the rates head wrapped at 100 columns),
    indented lines under it, or, for findings and frontiers, one paragraph per line."""
    if section.key in ("findings", "frontiers"):
        return "\n\n".join(section.lines)
    if section.headers is not None:
        head = "\n".join(textwrap.wrap(section.head, 100)) if section.key == "rates" else section.head
        return head + "\n" + table(section.headers, section.rows)
    if section.groups:
        return "\n".join([section.head, *(line for agent, parts in section.groups
                                          for line in _wrap_parts(f"{agent}: ", parts))])
    return "\n".join([section.head, *("  " + line for line in section.lines)])


def format_analysis(a: Analysis) -> str:
    """The analysis sections of the terminal report, one block per sweep."""
    blocks = []
    for sweep_id in a.stats.run.sweeps():
        sections = sweep_sections(a, sweep_id)
        if sections:
            blocks.append("\n\n".join([f"analysis of sweep {sweep_id}", *(render(s) for s in sections)]))
    return "\n\n".join(blocks) if blocks else "no scored trials to analyse"


def format_report(output_dir: Path, sweep_id: str | None = None, tasks_root: Path | None = None) -> str:
    """The whole terminal report of the run under `output_dir`: the summary table (the CSV's
    numbers) then `format_analysis`, whose note on deviations reads the task specs under
    `tasks_root` (default the bundled tasks/). Reads the trials once. Raises RebRayError for an
    unreadable or foreign results shard."""
    output_dir = Path(output_dir)
    trials = read_trials(output_dir, sweep_id)
    analysis = analyze(trials, read_stages(output_dir, sweep_id, columns=STAGE_COLUMNS),
                       deviations=run_deviations(output_dir, trials, tasks_root))
    return format_summary(summarize(trials), trials) + "\n\n" + format_analysis(analysis)


__all__ = ["RATE_STAGES", "SUCCESS_STAGES", "format_analysis", "format_report", "render", "table"]
