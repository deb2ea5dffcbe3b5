"""The per-agent summary table printed in the terminal (`python -m analysis`, `reb-ray report`,
and after `reb-ray sweep` / `regrade`).

It prints `analysis.scores.summarize` rows, the same numbers the paper CSV holds; it computes
nothing of its own. Reads results only through `reb_ray.results.read` (Parquet).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from reb_ray.results.read import latest_attempts, read_trials

from .columns import table
from .hardware import split_by_hardware
from .scores import STAGES, summarize

HEADERS = ("agent", "trials", "C0 missing/total", "C0 unowned", "C0 not run", "C1", "C2", "C3", "C4", "C5 lies",
           "no assets", "agent s", "env GiB", "tokens", "cost $", "infra")

LEGEND = ("C0 unowned: imports that resolve only to files no installed distribution owns (an empty package\n"
          "made by hand); C0 counts them as resolved, as the paper does.\n"
          "C1-C4: success/applicable, the paper's rate (applicable: the task spec says the stage applies);\n"
          "of those, hwN failed for lack of hardware and nrN were not run: neither is the agent's failure.\n"
          "C5 lies: the paper's path + version + capability sums; rfN: report contract faults (a key\n"
          "missing or of the wrong type), counted apart. no assets: stages left unmeasured by a missing asset.\n"
          "infra: infra_error attempts, never scored. agent s: mean agent-phase seconds per scored trial.\n"
          "env GiB: the release's measure (every file path counted).\n"
          "tokens: input + output tokens the LLM proxy counted; cost $: their price-table cost (USD),\n"
          "'(k/n)' when only k of the n trials know theirs.")


def _fmt(value: Any, spec: str = "") -> str:
    return "-" if value is None else format(value, spec)


def stage_cell(row: dict, name: str) -> str:
    """The terminal cell of stage `name` (e.g. "c4_multi_gpu") of a summarize row:
    "success/applicable" (the paper's rate, the number the analysis and the CSV's
    `_success`/`_denom` show, so no two views disagree), then " hwN" / " nrN" for the applicable stages
    owned by hardware / not run, or "-" alone when the stage applied to no trial."""
    if not row[f"{name}_denom"]:
        return "-"
    cell = row[f"{name}_success_over_all"]
    if row[f"{name}_hardware"]:
        cell += f" hw{row[f'{name}_hardware']}"
    if row[f"{name}_not_run"]:
        cell += f" nr{row[f'{name}_not_run']}"
    return cell


def row_cells(row: dict) -> list[str]:
    """The terminal table's cells (HEADERS order) of one `summarize` row; the HTML report's
    summary table shows the same strings. "C0 unowned" is c0_unowned_sum ("-": unknown)."""
    return [
        _fmt(row["agent"]),
        str(row["job_count"]),
        f"{_fmt(row['c0_missing_sum'])}/{_fmt(row['c0_total_sum'])}",
        _fmt(row["c0_unowned_sum"]),
        str(row["c0_not_run"]),
        *(stage_cell(row, name) for _, name in STAGES),
        c5_cell(row),
        _fmt(row["stages_missing_assets_sum"]),
        _fmt(row["agent_wall_time_avg_sec"], ".2f"),
        _fmt(row["env_size_avg_gb"], ".3f"),
        _fmt(row["agent_tokens_total_sum"]),
        cost_cell(row),
        str(row["infra_errors"]),
    ]


def c5_cell(row: dict) -> str:
    """The terminal cell of C5: c5_total_sum ("-" when unknown), then " rfN" when the audited
    reports hold N contract faults (c5_report_faults_sum)."""
    faults = row.get("c5_report_faults_sum")
    return _fmt(row["c5_total_sum"]) + (f" rf{faults}" if faults else "")


def cost_cell(row: dict) -> str:
    """The terminal cell of cost: cost_usd_sum in USD (4 decimals), "-" when unknown, and
    " (k/n)" when only k of the n scored trials know their cost."""
    if row["cost_usd_sum"] is None:
        return "-"
    cell = f"{row['cost_usd_sum']:.4f}"
    return cell if row["cost_valid_jobs"] == row["job_count"] else f"{cell} ({row['cost_valid_jobs']}/{row['job_count']})"


def format_tables(rows: list[dict]) -> str:
    """The plain-text tables of `summarize` rows, one block per sweep headed `sweep <id>`, no
    legend (`format_summary` adds it); "no trials" for no rows."""
    if not rows:
        return "no trials"
    blocks: list[str] = []
    sweeps: dict[Any, list[dict]] = {}
    for row in rows:
        sweeps.setdefault(row["run_id"], []).append(row)
    for sweep_id, group in sweeps.items():
        blocks.append(f"sweep {_fmt(sweep_id)}\n" + table(list(HEADERS), [row_cells(r) for r in group], indent=""))
    return "\n\n".join(blocks)


def format_summary(rows: list[dict], trials=None) -> str:
    """Plain-text table of `summarize` rows, one block per sweep headed `sweep <id>`, then
    LEGEND. Columns: HEADERS; agent s = agent_wall_time_avg_sec (seconds, 2 decimals), env GiB =
    env_size_avg_gb (2**30 bytes, 3 decimals), C5 lies = c5_total_sum, tokens =
    agent_tokens_total_sum, cost $ = `cost_cell` (cost_usd_sum, USD). Unknown prints "-".
    No rows gives "no trials". With `trials` (the table `rows` were summarized from) whose
    trials ran on more than one kind of hardware, the tables per kind follow
    (`format_by_hardware`), before the legend.
    """
    if not rows:
        return "no trials"
    text = format_tables(rows)
    if trials is not None:
        split = format_by_hardware(trials)
        if split:
            text += "\n\n" + split
    return text + "\n\n" + LEGEND


def format_by_hardware(trials: pa.Table) -> str:
    """The per-agent summary table once per hardware kind (`analysis.hardware`) when the current
    attempts mix kinds, each from `summarize` of that kind's trials only, headed `hardware:
    <kind> (N trials)`; "" with one kind (the table above already is that kind's)."""
    parts = split_by_hardware(trials)
    if len(parts) < 2:
        return ""
    blocks = [f"by hardware: this run mixes {len(parts)} kinds of node (GPU model, count, CUDA driver)"]
    for kind, kind_trials in parts.items():
        n = latest_attempts(kind_trials.select(["sweep_id", "trial_id", "attempt", "status"])).num_rows
        blocks.append(f"hardware: {kind} ({n} trial{'s' if n != 1 else ''})\n" + format_tables(summarize(kind_trials)))
    return "\n\n".join(blocks)


def print_summary(output_dir: Path, sweep_id: str | None = None) -> str:
    """Read `output_dir`'s trials (one sweep or all), print the summary table and return it.

    Raises reb_ray.errors.RebRayError for an unreadable or foreign results shard.
    """
    trials = read_trials(Path(output_dir), sweep_id)
    text = format_summary(summarize(trials), trials)
    print(text)
    return text
