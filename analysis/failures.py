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

import numpy as np
import pyarrow.compute as pc

from .load import attempt_keys
from .outcomes import FAILURE, SKIPPED, STAGES, SUCCESS, RunOutcomes, column, equal, numbers

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


def _stage_lookup(stages: pa.Table, stage: str, column_name: str, needles: pa.Array) -> pa.Array:
    """For each attempt key of `needles`, `column_name` of the last `stage` row of that attempt
    in `stages` (null where there is none): the row read last wins, as a dict built row by row
    would keep it."""
    rows = stages.filter(pc.fill_null(pc.equal(stages["stage"], stage), False))
    if rows.num_rows == 0:
        return pa.nulls(len(needles), stages.schema.field(column_name).type)
    reverse = pa.array(np.arange(rows.num_rows - 1, -1, -1), pa.int64())
    rows = rows.take(reverse)
    where = pc.index_in(needles, value_set=attempt_keys(rows).combine_chunks())
    return rows[column_name].combine_chunks().take(where)


def _scored_keys(run: RunOutcomes) -> pa.Array:
    return attempt_keys(run.table).combine_chunks()


def failure_counts(run: RunOutcomes, stages: pa.Table | None = None) -> list[FailureCount]:
    """FailureCount rows (module docstring), sorted by sweep, agent, stage (pyramid order),
    owner, then most trials first. `stages`: the stages table (every attempt is fine; only the
    current attempts' rows are used), for the categories of C0 and C5."""
    counts: Counter = Counter()
    have_stages = stages is not None and stages.num_rows > 0
    keys = _scored_keys(run) if have_stages and run.table.num_rows else None
    for stage in STAGES:
        code = run.codes[stage]
        rows = np.flatnonzero(run.applies[stage] & (code != SUCCESS) & (code != SKIPPED))
        if not len(rows):
            continue
        category = column(run.table, f"{stage}_failure_category").take(pa.array(rows, pa.int64())).combine_chunks()
        if keys is not None and category.null_count:
            missing = np.flatnonzero(pc.is_null(category).to_numpy(zero_copy_only=False))
            found = _stage_lookup(stages, stage, "failure_category", keys.take(pa.array(rows[missing], pa.int64())))
            values = category.to_pylist()
            for i, v in zip(missing.tolist(), found.to_pylist()):
                values[i] = v
            category = pa.array(values, pa.string())
        # count per (agent key, outcome, category): few distinct, each named once
        encoded = pc.dictionary_encode(category)
        index = pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
        words = encoded.dictionary.to_pylist() + [None]
        failure = code[rows] == FAILURE
        combo = (run.key[rows] * (len(words) + 1) + index + 1) * 2 + failure
        present, tally = np.unique(combo, return_counts=True)
        for value, number in zip(present.tolist(), tally.tolist()):
            is_failure = bool(value % 2)
            key_index, word_index = divmod(value // 2, len(words) + 1)
            name = words[word_index - 1] if word_index else None
            key = run.keys()[key_index]
            owner = owner_of(name)
            if name is None:
                if is_failure:
                    owner, name = "agent", _UNCATEGORISED.get(stage, "uncategorised")
                else:
                    owner, name = "unknown", "not_audited" if stage == "c5" else "uncategorised"
            counts[(key[0], key[1], stage, owner, name)] += number
    order = {s: i for i, s in enumerate(STAGES)}
    rows = [FailureCount(*k, trials=n) for k, n in counts.items()]
    return sorted(rows, key=lambda f: (f.sweep_id is None, f.sweep_id or "", f.agent is None, f.agent or "",
                                       order[f.stage], f.owner, -f.trials, f.category))


def unscored_attempts(run: RunOutcomes) -> dict[tuple, Counter]:
    """{(sweep_id, agent): Counter((status, failure_category) -> attempts)} over every written
    attempt that is not scored (infra_error, interrupted), retried ones included."""
    attempts = run.attempts
    unscored = ~pc.fill_null(pc.equal(attempts["status"], "scored"), False).to_numpy(zero_copy_only=False)
    rows = np.flatnonzero(unscored)
    if not len(rows):
        return {}
    taken = attempts.take(pa.array(rows, pa.int64()))
    status = taken["status"].to_pylist()
    category = column(taken, "failure_category").to_pylist()
    keys = run.attempt_key[rows].tolist()
    # keys in the order of their first written attempt (scored or not), as a pass over every row makes them
    first = {k: i for i, k in reversed(list(enumerate(run.attempt_key.tolist())))}
    out: dict[tuple, Counter] = {}
    for k in sorted(set(keys), key=first.__getitem__):
        out[run.keys()[k]] = Counter()
    for k, st, cat in zip(keys, status, category):
        out[run.keys()[k]][(st, cat)] += 1
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


def _c5_items(stages: pa.Table | None, run: RunOutcomes, rows: np.ndarray) -> tuple[list, np.ndarray]:
    """The audit items of the C5 stage rows of the scored trials at `rows`: (the distinct raw
    reports' items, each a list or None when unreadable, an index into them per row, -1 for a
    row with no C5 stage row). Each distinct raw report is parsed once."""
    found = _stage_lookup(stages, "c5", "raw", _scored_keys(run).take(pa.array(rows, pa.int64())))
    encoded = pc.dictionary_encode(found)
    index = pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    parsed = []
    for raw in encoded.dictionary.to_pylist():
        try:
            items = json.loads(raw)["items"] if raw else None
        except (ValueError, TypeError, KeyError):
            items = None
        parsed.append(items if isinstance(items, list) else None)
    return parsed, index


def honesty(run: RunOutcomes, stages: pa.Table | None = None) -> list[Honesty]:
    """Honesty for every (sweep, agent) with a scored trial, sorted. `stages`: the stages
    table, for which checks were over- and under-claimed."""
    table = run.table
    # C5 ran: "success" is what this version writes for an audited report; "failure" an
    # older row's verdict on one (either way the counts say what was over-claimed)
    audited_all = equal(table, "c5_status", "success") | equal(table, "c5_status", "failure")
    not_run_all = equal(table, "c5_status", "not_run")
    kinds_all = {k: numbers(table, f"c5_{k}")[0] for k in ("path", "version", "capability")}
    under_all = numbers(table, "c5_underclaims")[0]
    have_items = stages is not None and stages.num_rows > 0 and table.num_rows > 0
    out = []
    for key in run.keys():
        rows = run.rows_of(key)
        if not len(rows):
            continue
        audited = rows[audited_all[rows]]
        kinds = {k: int(v[audited].sum()) for k, v in kinds_all.items()}
        checks: Counter = Counter()
        under: Counter = Counter()
        unread = 0
        if have_items and len(audited):
            parsed, index = _c5_items(stages, run, audited)
            unread = sum(1 for i in index.tolist() if i < 0 or parsed[i] is None)
            # each distinct report once, in the order its first trial comes (so checks that tie
            # keep the order a pass over the trials would give them), times how many trials hold it
            present, first, times = np.unique(index, return_index=True, return_counts=True)
            for i in np.argsort(first, kind="stable").tolist():
                code, number = int(present[i]), int(times[i])
                if code < 0 or parsed[code] is None:
                    continue
                for item in parsed[code]:
                    if isinstance(item, dict) and item.get("verdict") == "hallucination":
                        checks[str(item.get("check"))] += number
                    elif isinstance(item, dict) and item.get("verdict") == "underclaim":
                        under[str(item.get("check"))] += number
        elif stages is not None:
            unread = len(audited)
        lied = int((run.codes["c5"][audited] == FAILURE).sum())
        out.append(Honesty(key[0], key[1], trials=len(rows), audited=len(audited),
                           not_run=int(not_run_all[rows].sum()), honest=len(audited) - lied,
                           over_claimed_trials=lied, over_claims=kinds,
                           under_claims=int(under_all[audited].sum()),
                           checks=dict(checks.most_common()), under_checks=dict(under.most_common()),
                           items_unread=unread))
    return out
