"""The analysis sections of a report as cells, formatted once for every view of it.

`sweep_sections(analysis, sweep_id)` gives the blocks of one sweep's analysis in report order
(findings, success rates, pass@k, paired comparisons, cost and efficiency, Pareto frontiers,
failures, the C5 audit, the note on stages that deviate from the paper's release), each a `Section` of already-formatted strings. The terminal report
(`analysis.terminal`) lays them out as text and the HTML report (`analysis.report_html`) as
tables, so both show the same rounded numbers (rates in whole percent, C0 to a tenth of a
percent, USD to 4 decimals); unknown is "-", never 0. Every number comes from
`analysis.analyze.Analysis`; nothing is computed here but the rounding.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .analyze import Analysis
from .cost import COST_STAGES
from .estimators import MIN_DISCORDANT
from .outcomes import LABELS, STAGES, equal, numbers, truthy
from .statistics import Interval, compare

#: The stages the rate, pass@k and comparison tables show (C0 is shown as a missing fraction).
RATE_STAGES = ("c1", "c2", "c3", "c4", "c5")


@dataclass(frozen=True)
class Section:
    """One block of a sweep's analysis. `key`: findings | rates | pass_k | comparisons | costs |
    frontiers | failures | honesty | shortcuts | deviations. `head`: its explanation (may hold line breaks where the
    terminal breaks it). A table when `headers` is set (`rows` of cells, first the agent);
    else `lines` (findings, comparisons, frontiers, deviations: one statement each) or `groups`
    (failures: per agent, its parts)."""

    key: str
    head: str = ""
    headers: list[str] | None = None
    rows: list[list[str]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    groups: list[tuple[str, list[str]]] = field(default_factory=list)


def pct(value: float | None, digits: int = 0) -> str:
    """A fraction as a percentage rounded to `digits` ("-" for None)."""
    return "-" if value is None else f"{100 * value:.{digits}f}%"


def _bounds(interval: Interval | None, digits: int = 0) -> str:
    if interval is None:
        return ""
    return f" [{100 * interval.low:.{digits}f}-{100 * interval.high:.{digits}f}]"


def _num(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def agents_of(a: Analysis, sweep_id) -> list:
    """The agents of `sweep_id` with a scored trial, sorted."""
    return [agent for agent in a.stats.run.agents(sweep_id) if a.stats.run.has_scored((sweep_id, agent))]


def rate_cell(s) -> str:
    """A StageStats as "successes/trials rate [low-high]" (percent), "-" with no trial."""
    if not s.trials:
        return "-"
    return f"{s.successes}/{s.trials} {pct(s.rate)}{_bounds(s.interval)}"


def c0_cell(c0) -> str:
    """A C0Stats as "missing/total fraction [low-high]" (percent, one decimal), "-" when
    unknown, "(n unknown)" appended for trials whose C0 count is unknown."""
    cell = "-" if c0.fraction is None else f"{c0.missing}/{c0.total} {pct(c0.fraction, 1)}{_bounds(c0.interval, 1)}"
    return cell + (f" ({c0.unknown} unknown)" if c0.unknown else "")


def _methods(a: Analysis, sweep_id) -> str:
    methods = {s.interval.method for s in a.stats.stages if s.sweep_id == sweep_id and s.interval}
    parts = []
    if "wilson" in methods:
        parts.append("Wilson (one trial per task)")
    if methods & {"task_bootstrap", "wilson_tasks"}:
        parts.append(f"bootstrap over tasks ({a.resamples} resamples, seed {a.seed}; Wilson over tasks where all or none succeeded)")
    return " and ".join(parts) or "none"


def rates(a: Analysis, sweep_id, agents: list) -> Section:
    """Success per stage with its 95% interval, C0 as the missing fraction."""
    rows = []
    for agent in agents:
        c0 = next(c for c in a.stats.c0 if (c.sweep_id, c.agent) == (sweep_id, agent))
        rows.append([str(agent), c0_cell(c0), *(rate_cell(a.stats.stage(sweep_id, agent, s)) for s in RATE_STAGES)])
    head = ("Success per stage over the trials of the tasks it applies to (the paper's rate), 95% interval: "
            + _methods(a, sweep_id) + ". C0: missing imports / baseline total (task bootstrap; Wilson over the imports when none or all are missing)."
            " C5: audited with no over-claim.")
    return Section("rates", head, ["agent", "C0 missing", *(LABELS[s] for s in RATE_STAGES)], rows)


def pass_k(a: Analysis, sweep_id, agents: list) -> Section | None:
    """pass@1 | pass@k / pass^k per stage; None when no task has two trials."""
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
    return Section("pass_k", "pass@1 | pass@k / pass^k (k = the trials per task; Chen et al. 2021's unbiased estimator):",
                   ["agent", *(LABELS[s] for s in RATE_STAGES)], rows)


def comparisons(a: Analysis, sweep_id, agents: list) -> Section | None:
    """Each stage's best agent against every other (paired bootstrap, McNemar); None for one agent."""
    if len(agents) < 2:
        return None
    lines = []
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
                lines.append(f"{LABELS[stage]} {best.agent} vs {other.agent}: {cmp.note}")
                continue
            text = (f"{LABELS[stage]} {best.agent} vs {other.agent}: {100 * cmp.difference:+.0f} pts"
                    f" [{100 * cmp.interval.low:+.0f}, {100 * cmp.interval.high:+.0f}], {cmp.tasks} task{'s' if cmp.tasks != 1 else ''},"
                    f" {cmp.a_only}/{cmp.b_only} solved by one only, p={cmp.p_value:.3g}")
            if cmp.note:
                text += f"; too few tasks to tell them apart ({cmp.a_only + cmp.b_only} differ, {MIN_DISCORDANT} needed)"
            lines.append(text)
    if not lines:
        return None
    return Section("comparisons", "Paired comparisons with each stage's best agent (tasks both ran; difference in success,"
                   " 95% paired bootstrap interval; McNemar's exact test on per-task outcomes):", lines=lines)


def _per_success(p, what: str) -> str:
    value = p.cost_usd if what == "cost" else p.tokens
    if value is None:
        # no trial's task applies the stage: nothing to count, as the summary's `-`
        return "none ok" if p.successes == 0 and p.trials else "-"
    return f"{value:.4f}" if what == "cost" else f"{value:,.0f}"


#: The cost table's environment size: unique bytes (each inode once), not the summary's `env GiB`
#: (the release's every-path measure); a distinct label so one name never means two numbers.
UNIQUE_GIB = "env GiB (unique)"


def costs(a: Analysis, sweep_id) -> Section:
    """Tokens, cost, agent time and env size per trial, cost and tokens per C1/C3/C4 success."""
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
    headers = ["agent", "tokens/trial", "$/trial", "agent s", UNIQUE_GIB,
               *(f"$/{LABELS[s]} ok" for s in COST_STAGES), *(f"tok/{LABELS[s]} ok" for s in COST_STAGES)]
    head = ("Cost and efficiency: means per scored trial over those that know the value ('-': unknown, never 0;\n"
            "'(k/n)': k of n trials priced); per success: the stage's trials' cost / its successes ('none ok': no success; '-' where no task\n"
            "applies the stage).\n"
            f"{UNIQUE_GIB}: the environment's disk bytes, each hard-linked file once (env_size_bytes, the CSV's\n"
            "env_size_unique_avg_gb); the summary's `env GiB` is the release's measure, every path counted.")
    return Section("costs", head, headers, rows)


def frontiers(a: Analysis, sweep_id) -> Section:
    """One line per metric (cost, tokens) naming each stage's Pareto frontier."""
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
    return Section("frontiers", lines=lines)


def findings(a: Analysis, sweep_id) -> Section:
    """One `FINDING:` line per agent that spent FINDING_RATIO x another's tokens or cost per
    trial for no better success (`analysis.cost.token_findings`)."""
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
        rates_ = ", ".join(f"{LABELS[s]} {pct(x)} vs {pct(y)}" for s, (x, y) in found[0].stages.items())
        verdict = "no better success" if found[0].worse_or_equal else "no significantly better success"
        lines.append(f"FINDING: {agent} spent {' and '.join(spends)} for {verdict} ({rates_}).")
    return Section("findings", lines=lines)


def failures(a: Analysis, sweep_id, agents: list) -> Section:
    """Per agent: its non-successes per stage by category ([owner] when not the agent's), and
    the attempts that never scored."""
    groups = []
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
        groups.append((str(agent), parts or ["none"]))
    return Section("failures", "Failures per stage (current scored trials; the agent's unless [owner] says otherwise):",
                   groups=groups)


def honesty(a: Analysis, sweep_id) -> Section:
    """The C5 audit per agent: audited, never ran, honest, over-claims by kind and check, under-claims."""
    rows = []
    for h in (h for h in a.honesty if h.sweep_id == sweep_id):
        kinds = "/".join(str(h.over_claims[k]) for k in ("path", "version", "capability"))
        which = ", ".join(f"{c} {n}" for c, n in h.checks.items()) or "-"
        under = ", ".join(f"{c} {n}" for c, n in h.under_checks.items()) or ("-" if not h.under_claims else str(h.under_claims))
        rows.append([str(h.agent), str(h.audited), str(h.not_run), str(h.honest), kinds, which, under])
    head = ("C5 self-report audit (not run: C5 never ran, neither honest nor not; over-claims = the paper's\n"
            "hallucinations path/version/capability; under-claims apart):")
    return Section("honesty", head, ["agent", "audited", "not run", "honest", "over p/v/c", "over-claimed checks",
                                     "under-claimed"], rows)


def _shortcut_counts(run, rows) -> list[int]:
    """Per kind, the trials at `rows` (positions in `run.table`) whose row records it
    (SHORTCUT_HEADERS order)."""
    table = run.table
    # A stage that failed anyway has an unverified witness too; only a run that succeeded
    # without one is the shortcut (its stage then fails as `unverified_run`).
    unverified = np.zeros(table.num_rows, bool)
    for stage in ("c1", "c3", "c4"):
        unverified |= equal(table, f"{stage}_failure_category", "unverified_run")
    unowned, known = numbers(table, "c0_unowned")
    kinds = [unverified, truthy(table, "repo_restored_files") | truthy(table, "repo_head_moved"),
             known & (unowned > 0), equal(table, "python_path_kind", "script"), truthy(table, "startup_hooks"),
             truthy(table, "suspicious_actions")]
    return [int(kind[rows].sum()) for kind in kinds]


SHORTCUT_HEADERS = ["agent", "unverified run", "edits put back", "C0 unowned", "script python", "start-up hooks",
                    "suspicious"]


def shortcuts(a: Analysis, sweep_id, agents: list) -> Section | None:
    """Per agent, the current scored trials whose rows record a shortcut: a command stage that
    exited 0 with no valid witness (`unverified_run`), tracked files the probe phase put back to
    the pinned commit, imports C0 resolved to files no distribution owns, a reported python that
    is a script, start-up hooks the agent added, suspicious actions in the trajectory. Only the
    first is scored (as the agent's failure of that stage); the others are evidence for a reader
    (`reb-ray trial show` names the files). None when no trial records any."""
    rows = []
    for agent in agents:
        counts = _shortcut_counts(a.stats.run, a.stats.run.rows_of((sweep_id, agent)))
        if any(counts):
            rows.append([str(agent), *map(str, counts)])
    if not rows:
        return None
    head = ("Shortcuts recorded (trials per agent; only an unverified run is scored, as the agent's failure of\n"
            "its stage; `reb-ray trial show` names what was put back, unowned or flagged):")
    return Section("shortcuts", head, SHORTCUT_HEADERS, rows)


#: A task spec's stage names as the report labels them.
_SPEC_STAGE_LABELS = {"cpu": "C1", "single_gpu": "C3", "multi_gpu": "C4"}


def deviations(a: Analysis, sweep_id) -> Section | None:
    """The note under a sweep's tables: per task, the stages whose command or success rule
    differs on purpose from the paper's release (their numbers are not the paper's for that
    stage), then the tasks whose spec is unknown. None when nothing was looked up."""
    found = a.deviations.get(sweep_id)
    if found is None:
        return None
    lines = [f"{task}: {', '.join(_SPEC_STAGE_LABELS[s] for s in stages)}" for task, stages in found.stages.items()]
    if found.unknown:
        lines.append(f"unknown for {len(found.unknown)} task(s) whose spec is not under the tasks root or changed "
                     f"since the sweep ran: {', '.join(found.unknown)}")
    suites = ", ".join(found.suites) or "-"
    head = (f"Stages that differ from the paper's release (task.toml `deviation`; the reasons: "
            f"`reb-ray tasks list --suite {suites}`):")
    return Section("deviations", head, lines=lines)


def sweep_sections(a: Analysis, sweep_id) -> list[Section]:
    """The sections of one sweep in report order; empty when it has no scored trial. Sections
    with nothing to say (no finding, one agent, no k >= 2) are left out."""
    agents = agents_of(a, sweep_id)
    if not agents:
        return []
    out = [findings(a, sweep_id), rates(a, sweep_id, agents), pass_k(a, sweep_id, agents),
           comparisons(a, sweep_id, agents), costs(a, sweep_id), frontiers(a, sweep_id),
           # every agent of the sweep: one whose attempts all failed for infrastructure shows them here
           failures(a, sweep_id, a.stats.run.agents(sweep_id)), honesty(a, sweep_id), shortcuts(a, sweep_id, agents),
           deviations(a, sweep_id)]
    return [s for s in out if s is not None and (s.headers or s.lines or s.groups)]
