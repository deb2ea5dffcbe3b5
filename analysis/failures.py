"""Failure and honesty analysis: who owns each failure, and what the reports over-claimed.

Failures: every stage C0..C5 of every current scored trial whose outcome
(`analysis.outcomes.outcome`) is not a success, counted per (sweep, agent, stage, owner,
category). The category is the trials row's `cN_failure_category` (C1..C4), else the stage
row's `failure_category` when a stages table is given (C0, C5); the owner is
`reb_ray.grading.categories.owner_of` of it: agent, hardware, infra, and, for a failure with
no category, the agent (as in `analysis.scores`) or, for a stage not run for no recorded
reason, "unknown". Uncategorised failures are named for what they are: C0 `missing_imports`
(some baseline import is missing), C5 `over_claim` (the audited report claims something the
probes contradict), others `uncategorised`; a C5 not run for no recorded reason is
`not_audited`. Attempts that never scored (infra_error, interrupted) are counted apart, per
agent and category, every attempt (retried ones too).

Honesty (C5): per agent, the trials whose report was audited, those where C5 never ran
(`not_run`: no report, no facts record; not counted as honest or dishonest), the audited ones
with no over-claim, the paper's sums per kind (path, version, capability), the under-claims
(claims below what was observed, kept apart from the paper's sums), and, from the C5 stage rows'
audit items, which checks were over- and under-claimed and how often.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field

import pyarrow as pa

from reb_ray.grading.categories import owner_of

from .load import stages_of
from .outcomes import OUTCOME, STAGES, RunOutcomes

_UNCATEGORISED = {"c0": "missing_imports", "c5": "over_claim"}


@dataclass(frozen=True)
class FailureCount:
    """`trials` current scored trials of (sweep, agent) whose `stage` was not a success, with
    this owner ("agent", "hardware", "infra", "unknown") and category."""

    sweep_id: str | None
    agent: str | None
    stage: str
    owner: str
    category: str
    trials: int


def _stage_categories(stages: pa.Table | None, run: RunOutcomes) -> dict[tuple, str | None]:
    if stages is None or stages.num_rows == 0:
        return {}
    keys = pa.table({"sweep_id": [r["sweep_id"] for r in run.rows], "trial_id": [r["trial_id"] for r in run.rows],
                     "attempt": pa.array([r["attempt"] for r in run.rows], pa.int32())})
    mine = stages_of(stages.select(["sweep_id", "trial_id", "attempt", "stage", "failure_category"]), keys)
    return {(r["sweep_id"], r["trial_id"], r["attempt"], r["stage"]): r["failure_category"] for r in mine.to_pylist()}


def failure_counts(run: RunOutcomes, stages: pa.Table | None = None) -> list[FailureCount]:
    """FailureCount rows (module docstring), sorted by sweep, agent, stage (pyramid order),
    owner, then most trials first. `stages`: the stages table (every attempt is fine; only the
    current attempts' rows are used), for the categories of C0 and C5."""
    from_stages = _stage_categories(stages, run)
    counts: Counter = Counter()
    for key in run.keys():
        for row in run.trials.get(key, []):
            applies = run.applies[(row["sweep_id"], row.get("task_id"))]
            for stage in STAGES:
                result = row[OUTCOME][stage]
                if not applies[stage] or result in ("success", "skipped"):
                    continue
                category = row.get(f"{stage}_failure_category")
                if category is None:
                    category = from_stages.get((row["sweep_id"], row["trial_id"], row["attempt"], stage))
                owner = owner_of(category)
                if category is None:
                    if result == "failure":
                        owner, category = "agent", _UNCATEGORISED.get(stage, "uncategorised")
                    else:
                        owner, category = "unknown", "not_audited" if stage == "c5" else "uncategorised"
                counts[(key[0], key[1], stage, owner, category)] += 1
    order = {s: i for i, s in enumerate(STAGES)}
    rows = [FailureCount(*k, trials=n) for k, n in counts.items()]
    return sorted(rows, key=lambda f: (f.sweep_id is None, f.sweep_id or "", f.agent is None, f.agent or "",
                                       order[f.stage], f.owner, -f.trials, f.category))


def unscored_attempts(run: RunOutcomes) -> dict[tuple, Counter]:
    """{(sweep_id, agent): Counter((status, failure_category) -> attempts)} over every written
    attempt that is not scored (infra_error, interrupted), retried ones included."""
    out: dict[tuple, Counter] = {}
    for key, attempts in run.all_attempts.items():
        for a in attempts:
            if a.get("status") != "scored":
                out.setdefault(key, Counter())[(a.get("status"), a.get("failure_category"))] += 1
    return out


@dataclass(frozen=True)
class Honesty:
    """C5 of one (sweep, agent) (module docstring). over_claims: {kind: sum} for path, version,
    capability; over_claimed_trials: audited trials with at least one; checks / under_checks:
    {check: times} from the audit items (empty without a stages table); items_unread: audited
    trials whose C5 stage row holds no readable audit items."""

    sweep_id: str | None
    agent: str | None
    trials: int
    audited: int
    not_run: int
    honest: int
    over_claimed_trials: int
    over_claims: dict[str, int]
    under_claims: int
    checks: dict[str, int] = field(default_factory=dict)
    under_checks: dict[str, int] = field(default_factory=dict)
    items_unread: int = 0


def _c5_items(stages: pa.Table | None, run: RunOutcomes) -> dict[tuple, list | None]:
    if stages is None or stages.num_rows == 0:
        return {}
    keys = pa.table({"sweep_id": [r["sweep_id"] for r in run.rows], "trial_id": [r["trial_id"] for r in run.rows],
                     "attempt": pa.array([r["attempt"] for r in run.rows], pa.int32())})
    rows = stages_of(stages.select(["sweep_id", "trial_id", "attempt", "stage", "raw"]), keys, "c5").to_pylist()
    out: dict[tuple, list | None] = {}
    for r in rows:
        try:
            items = json.loads(r["raw"])["items"] if r["raw"] else None
        except (ValueError, TypeError, KeyError):
            items = None
        out[(r["sweep_id"], r["trial_id"], r["attempt"])] = items if isinstance(items, list) else None
    return out


def honesty(run: RunOutcomes, stages: pa.Table | None = None) -> list[Honesty]:
    """Honesty for every (sweep, agent) with a scored trial, sorted. `stages`: the stages
    table, for which checks were over- and under-claimed."""
    items = _c5_items(stages, run)
    out = []
    for key in run.keys():
        rows = run.trials.get(key)
        if not rows:
            continue
        # C5 ran: "success" is what this version writes for an audited report; "failure" an
        # older row's verdict on one (either way the counts say what was over-claimed)
        audited = [r for r in rows if r.get("c5_status") in ("success", "failure")]
        kinds = {k: sum(r.get(f"c5_{k}") or 0 for r in audited) for k in ("path", "version", "capability")}
        checks: Counter = Counter()
        under: Counter = Counter()
        unread = 0
        for r in audited:
            found = items.get((r["sweep_id"], r["trial_id"], r["attempt"]))
            if found is None:
                unread += stages is not None
                continue
            for item in found:
                if isinstance(item, dict) and item.get("verdict") == "hallucination":
                    checks[str(item.get("check"))] += 1
                elif isinstance(item, dict) and item.get("verdict") == "underclaim":
                    under[str(item.get("check"))] += 1
        lied = sum(r[OUTCOME]["c5"] == "failure" for r in audited)
        out.append(Honesty(key[0], key[1], trials=len(rows), audited=len(audited),
                           not_run=sum(r.get("c5_status") == "not_run" for r in rows), honest=len(audited) - lied,
                           over_claimed_trials=lied, over_claims=kinds,
                           under_claims=sum(r.get("c5_underclaims") or 0 for r in audited),
                           checks=dict(checks.most_common()), under_checks=dict(under.most_common()),
                           items_unread=unread))
    return out
