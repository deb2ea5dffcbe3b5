"""The terminal report of a run (`reb-ray report RUN`, `python -m analysis RUN`): the per-agent
summary table (`analysis.summary`, the CSV's numbers), then the analysis (`analysis.analyze`):
success rates with 95% intervals, pass@k, paired comparisons, cost and efficiency, findings,
failures and the C5 audit. Numbers are rounded for reading (rates in whole percent, C0 to a
tenth of a percent, USD to 4 decimals); unknown prints "-", never 0. It formats only: every
number comes from the modules it names.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from reb_ray.results.read import read_stages, read_trials

from .analyze import STAGE_COLUMNS, Analysis, analyze
from .cost import COST_STAGES, SUCCESS_STAGES
from .estimators import MIN_DISCORDANT
from .outcomes import LABELS, STAGES
from .scores import summarize
from .statistics import Interval, compare
from .summary import format_summary

#: The stages the rate, pass@k and comparison tables show (C0 is shown as a missing fraction).
RATE_STAGES = ("c1", "c2", "c3", "c4", "c5")


def _pct(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{100 * value:.{digits}f}%"


def _bounds(interval: Interval | None, digits: int = 0) -> str:
    if interval is None:
        return ""
    return f" [{100 * interval.low:.{digits}f}-{100 * interval.high:.{digits}f}]"


def _num(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def table(headers: list[str], rows: list[list[str]], indent: str = "  ") -> str:
    """Plain-text columns: the first left-aligned, the rest right-aligned, a rule under the
    header."""
    lines = [headers] + rows
    widths = [max(len(line[i]) for line in lines) for i in range(len(headers))]
    out = []
    for n, line in enumerate(lines):
        out.append(indent + "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                      for i, (c, w) in enumerate(zip(line, widths))).rstrip())
        if n == 0:
            out.append(indent + "  ".join("-" * w for w in widths))
    return "\n".join(out)


def _rate_cell(s) -> str:
    if not s.trials:
        return "-"
    return f"{s.successes}/{s.trials} {_pct(s.rate)}{_bounds(s.interval)}"


def _methods(a: Analysis, sweep_id) -> str:
    methods = {s.interval.method for s in a.stats.stages if s.sweep_id == sweep_id and s.interval}
    parts = []
    if "wilson" in methods:
        parts.append("Wilson (one trial per task)")
    if methods & {"task_bootstrap", "wilson_tasks"}:
        parts.append(f"bootstrap over tasks ({a.resamples} resamples, seed {a.seed}; Wilson over tasks where all or none succeeded)")
    return " and ".join(parts) or "none"


def _rates(a: Analysis, sweep_id, agents: list) -> str:
    rows = []
    for agent in agents:
        c0 = next(c for c in a.stats.c0 if (c.sweep_id, c.agent) == (sweep_id, agent))
        c0_cell = "-" if c0.fraction is None else f"{c0.missing}/{c0.total} {_pct(c0.fraction, 1)}{_bounds(c0.interval, 1)}"
        if c0.unknown:
            c0_cell += f" ({c0.unknown} unknown)"
        rows.append([str(agent), c0_cell, *(_rate_cell(a.stats.stage(sweep_id, agent, s)) for s in RATE_STAGES)])
    head = ("Success per stage over the trials of the tasks it applies to (the paper's rate), 95% interval: "
            + _methods(a, sweep_id) + ". C0: missing imports / baseline total. C5: audited with no over-claim.")
    return "\n".join(textwrap.wrap(head, 100)) + "\n" + table(["agent", "C0 missing", *(LABELS[s] for s in RATE_STAGES)], rows)


def _pass_k(a: Analysis, sweep_id, agents: list) -> str | None:
    ks = [max(s.pass_at_k) for s in a.stats.stages if s.sweep_id == sweep_id and s.stage in RATE_STAGES and s.pass_at_k]
    if not ks or max(ks) < 2:
        return None
    rows = []
    for agent in agents:
        cells = []
        for stage in RATE_STAGES:
            s = a.stats.stage(sweep_id, agent, stage)
            if not s.pass_at_k:
                cells.append("-")
                continue
            k = max(s.pass_at_k)
            cells.append(f"{s.pass_at_k[1]:.2f} | {s.pass_at_k[k]:.2f} / {s.pass_hat_k[k]:.2f} (k={k})")
        rows.append([str(agent), *cells])
    return ("pass@1 | pass@k / pass^k (k = the trials per task; Chen et al. 2021's unbiased estimator):\n"
            + table(["agent", *(LABELS[s] for s in RATE_STAGES)], rows))


def _comparisons(a: Analysis, sweep_id, agents: list) -> str | None:
    if len(agents) < 2:
        return None
    lines = ["Paired comparisons with each stage's best agent (tasks both ran; difference in success, 95% paired"
             " bootstrap interval; McNemar's exact test on per-task outcomes):"]
    for stage in RATE_STAGES:
        ranked = [a.stats.stage(sweep_id, agent, stage) for agent in agents]
        ranked = [s for s in ranked if s.rate is not None]
        if len(ranked) < 2:
            continue
        best = max(ranked, key=lambda s: s.rate)  # max keeps the first of equals: agents are sorted
        for other in ranked:
            if other is best:
                continue
            cmp = compare(a.stats.run, sweep_id, stage, best.agent, other.agent, resamples=a.resamples, seed=a.seed)
            if cmp.difference is None:
                lines.append(f"  {LABELS[stage]} {best.agent} vs {other.agent}: {cmp.note}")
                continue
            text = (f"  {LABELS[stage]} {best.agent} vs {other.agent}: {100 * cmp.difference:+.0f} pts"
                    f" [{100 * cmp.interval.low:+.0f}, {100 * cmp.interval.high:+.0f}], {cmp.tasks} tasks,"
                    f" {cmp.a_only}/{cmp.b_only} solved by one only, p={cmp.p_value:.3g}")
            if cmp.note:
                text += f"; too few tasks to tell them apart ({cmp.a_only + cmp.b_only} differ, {MIN_DISCORDANT} needed)"
            lines.append(text)
    return "\n".join(lines) if len(lines) > 1 else None


def _per_success(p, what: str) -> str:
    value = p.cost_usd if what == "cost" else p.tokens
    if value is None:
        return "none ok" if p.successes == 0 else "-"
    return f"{value:.4f}" if what == "cost" else f"{value:,.0f}"


def _costs(a: Analysis, sweep_id) -> str:
    rows = []
    for c in (c for c in a.costs if c.sweep_id == sweep_id):
        cells = [str(c.agent), _num(c.tokens_per_trial, ",.0f"), _num(c.cost_per_trial, ".4f"),
                 _num(c.agent_time_mean_s, ".1f"),
                 _num(None if c.env_size_mean_bytes is None else c.env_size_mean_bytes / 2**30, ".3f")]
        for stage in COST_STAGES:
            p = c.per_success[stage]
            cells.append("-" if p.cost_usd is None and c.cost_known == 0 else _per_success(p, "cost"))
        for stage in COST_STAGES:
            p = c.per_success[stage]
            cells.append("-" if p.tokens is None and c.tokens_known == 0 else _per_success(p, "tokens"))
        if c.cost_known and c.cost_known < c.trials:
            cells[2] += f" ({c.cost_known}/{c.trials})"
        rows.append(cells)
    headers = ["agent", "tokens/trial", "$/trial", "agent s", "env GiB",
               *(f"$/{LABELS[s]} ok" for s in COST_STAGES), *(f"tok/{LABELS[s]} ok" for s in COST_STAGES)]
    return ("Cost and efficiency: means per scored trial over those that know the value ('-': unknown, never 0;\n"
            "'(k/n)': k of n trials priced); per success: the stage's trials' cost / its successes ('none ok': no success).\n"
            + table(headers, rows))


def _frontiers(a: Analysis, sweep_id) -> list[str]:
    lines = []
    for metric, label in (("cost_usd", "$/trial"), ("tokens", "tokens/trial")):
        fronts = [f for f in a.frontiers if f.sweep_id == sweep_id and f.metric == metric]
        if not any(f.agents for f in fronts):
            continue
        parts = [f"{LABELS[f.stage]} {', '.join(map(str, f.agents)) or '-'}" for f in fronts]
        unknown = sorted({str(x) for f in fronts for x in f.unknown})
        line = f"Pareto frontier on ({label}, success): " + "; ".join(parts)
        if unknown:
            line += f" (left out, unknown {label}: {', '.join(unknown)})"
        lines.append(line)
    return lines


def _findings(a: Analysis, sweep_id) -> list[str]:
    lines = []
    by_pair: dict[tuple, list] = {}
    for f in a.findings:
        if f.sweep_id == sweep_id:
            by_pair.setdefault((f.agent, f.baseline), []).append(f)
    for (agent, baseline), found in by_pair.items():
        spends = []
        for f in found:
            if f.metric == "tokens":
                spends.append(f"{f.ratio:.1f}x {baseline}'s tokens per trial ({f.spent:,.0f} vs {f.baseline_spent:,.0f})")
            else:
                whose = "its" if spends else f"{baseline}'s"
                spends.append(f"{f.ratio:.1f}x {whose} cost per trial (${f.spent:.4f} vs ${f.baseline_spent:.4f})")
        rates = ", ".join(f"{LABELS[s]} {_pct(x)} vs {_pct(y)}" for s, (x, y) in found[0].stages.items())
        verdict = "no better success" if found[0].worse_or_equal else "no significantly better success"
        lines.append(f"FINDING: {agent} spent {' and '.join(spends)} for {verdict} ({rates}).")
    return lines


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


def _failures(a: Analysis, sweep_id, agents: list) -> str:
    lines = ["Failures per stage (current scored trials; the agent's unless [owner] says otherwise):"]
    for agent in agents:
        mine = [f for f in a.failures if (f.sweep_id, f.agent) == (sweep_id, agent)]
        parts = []
        for stage in STAGES:
            here = [f for f in mine if f.stage == stage]
            if here:
                parts.append(f"{LABELS[stage]} " + ", ".join(
                    f"{f.category} {f.trials}" + ("" if f.owner == "agent" else f" [{f.owner}]") for f in here))
        unscored = a.unscored.get((sweep_id, agent))
        if unscored:
            parts.append("never scored: " + ", ".join(f"{status} {category or '-'} {n}"
                                                       for (status, category), n in sorted(unscored.items(), key=str)))
        lines.extend(_wrap_parts(f"{agent}: ", parts or ["none"]))
    return "\n".join(lines)


def _honesty(a: Analysis, sweep_id) -> str:
    rows = []
    for h in (h for h in a.honesty if h.sweep_id == sweep_id):
        kinds = "/".join(str(h.over_claims[k]) for k in ("path", "version", "capability"))
        which = ", ".join(f"{c} {n}" for c, n in h.checks.items()) or "-"
        under = ", ".join(f"{c} {n}" for c, n in h.under_checks.items()) or ("-" if not h.under_claims else str(h.under_claims))
        rows.append([str(h.agent), str(h.audited), str(h.not_run), str(h.honest), kinds, which, under])
    return ("C5 self-report audit (not run: C5 never ran, neither honest nor not; over-claims = the paper's\n"
            "hallucinations path/version/capability; under-claims apart):\n"
            + table(["agent", "audited", "not run", "honest", "over p/v/c", "over-claimed checks", "under-claimed"], rows))


def format_analysis(a: Analysis) -> str:
    """The analysis sections of the terminal report, one block per sweep."""
    blocks = []
    for sweep_id in a.stats.run.sweeps():
        agents = [agent for agent in a.stats.run.agents(sweep_id) if (sweep_id, agent) in a.stats.run.by_agent]
        if not agents:
            continue
        parts = [f"analysis of sweep {sweep_id}", *_findings(a, sweep_id), _rates(a, sweep_id, agents)]
        parts += [p for p in (_pass_k(a, sweep_id, agents), _comparisons(a, sweep_id, agents)) if p]
        # every agent of the sweep: one whose attempts all failed for infrastructure shows them here
        parts += [_costs(a, sweep_id), *_frontiers(a, sweep_id), _failures(a, sweep_id, a.stats.run.agents(sweep_id)),
                  _honesty(a, sweep_id)]
        blocks.append("\n\n".join(parts))
    return "\n\n".join(blocks) if blocks else "no scored trials to analyse"


def format_report(output_dir: Path, sweep_id: str | None = None) -> str:
    """The whole terminal report of the run under `output_dir`: the summary table (the CSV's
    numbers) then `format_analysis`. Reads the trials once. Raises RebRayError for an
    unreadable or foreign results shard."""
    output_dir = Path(output_dir)
    trials = read_trials(output_dir, sweep_id)
    analysis = analyze(trials, read_stages(output_dir, sweep_id, columns=STAGE_COLUMNS))
    return format_summary(summarize(trials)) + "\n\n" + format_analysis(analysis)


__all__ = ["RATE_STAGES", "SUCCESS_STAGES", "format_analysis", "format_report", "table"]
