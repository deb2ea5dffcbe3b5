"""Per-task stage outcomes of a run: the one grouping that statistics, cost and failure
analysis share.

Rows: each trial's current scored attempt (`reb_ray.results.read.latest_attempts`), as in
`analysis.scores`. A trial's outcome on a stage is `analysis.scores.stage_outcome` (success,
failure = the agent's, hardware, not_run, skipped), except C5, which has no pass/fail status of
its own (`c5_status` success means "audited"): C5 is a success when the report was audited and
holds no over-claim (c5_path + c5_version + c5_capability = 0), a failure when it holds one.

Denominators come from the task spec's applicability, never from the statuses a trial happened
to record, so every agent is rated over the same trials (the rule is `skip_reason`): C0 and C5
apply to every task; C1..C4 as the spec's stages say. With the specs at hand (`tasks=`) they
decide; without them, applicability is read from the rows, where it is recorded on every path
(a stage the spec does not apply is `skipped` in every trial of the task, also when nothing was
probed): a stage applies to a task when any scored trial of the task in the sweep records a
status other than `skipped`, and not when they all record `skipped`. Every scored trial of a
task counts in each stage that applies to the task, so a trial whose own status for it is null
counts as not a success (outcome None, "unknown"), where `analysis.scores` (whose denominators
read the row's own status) leaves it out; rows this version writes always hold the status, so
the two agree. A stage whose status is null in every trial of a task (rows older than the
stage) is unknown for the task and counts nowhere, as in `analysis.scores`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import pyarrow as pa

from reb_ray.grading.unmeasured import skip_reason
from reb_ray.models.task import TaskSpec

from .scores import current_scored, stage_outcome

#: The stages statistics are given for, in pyramid order.
STAGES = ("c0", "c1", "c2", "c3", "c4", "c5")
LABELS = {s: s.upper() for s in STAGES}
#: Stages whose applicability the task spec decides (C0 and C5 apply to every task).
SPEC_STAGES = ("c1", "c2", "c3", "c4")

Key = tuple  # (sweep_id, agent)
#: The key under which `collect` keeps each row's {stage: outcome} (no trials column has it).
OUTCOME = "_outcome"


def sort_key(key: Iterable) -> tuple:
    """A sort key for tuples that may hold None (None sorts last)."""
    return tuple((v is None, v if v is not None else "") for v in key)


def c5_lies(row: dict) -> int | None:
    """The row's C5 over-claims: c5_path + c5_version + c5_capability over the known ones
    (None when none is known)."""
    known = [row.get(f"c5_{k}") for k in ("path", "version", "capability")]
    known = [v for v in known if v is not None]
    return sum(known) if known else None


def outcome(row: dict, stage: str) -> str | None:
    """The trial's outcome on `stage` (c0..c5): `stage_outcome`'s, with C5 judged on its
    over-claims (module docstring). None when the row holds no status for the stage."""
    result = stage_outcome(row, stage)
    if stage == "c5" and result == "success" and (c5_lies(row) or 0) > 0:
        return "failure"
    return result


def applicability(rows: list[dict], tasks: list[TaskSpec] | None = None) -> dict[tuple, dict[str, bool | None]]:
    """{(sweep_id, task_id): {stage: applies}} for every task of `rows` (current scored
    trials rows), stages STAGES. True / False, or None when unknown (module docstring).
    With `tasks`, a task among them is judged by its spec (`skip_reason`); others by the rows.
    """
    specs = {t.id: t for t in tasks or []}
    seen: dict[tuple, dict[str, set]] = {}
    for row in rows:
        statuses = seen.setdefault((row["sweep_id"], row.get("task_id")), {s: set() for s in SPEC_STAGES})
        for stage in SPEC_STAGES:
            statuses[stage].add(row.get(f"{stage}_status"))
    out: dict[tuple, dict[str, bool | None]] = {}
    for key, statuses in seen.items():
        spec = specs.get(key[1])
        applies: dict[str, bool | None] = {"c0": True, "c5": True}
        for stage in SPEC_STAGES:
            if spec is not None:
                applies[stage] = skip_reason(spec, stage) is None
            elif statuses[stage] - {None, "skipped"}:
                applies[stage] = True
            elif "skipped" in statuses[stage]:
                applies[stage] = False
            else:
                applies[stage] = None
        out[key] = {s: applies[s] for s in STAGES}
    return out


@dataclass
class RunOutcomes:
    """A run's current scored trials grouped for analysis.

    rows: the current scored trials rows (dicts of COLUMNS, plus OUTCOME: {stage: outcome}
    for every stage of STAGES, computed once). applies: `applicability(rows, tasks)`.
    by_agent: {(sweep_id, agent): {stage: {task_id: [outcome per trial, by trial_index]}}},
    only tasks where the stage applies. trials: {(sweep_id, agent): [rows]}.
    all_attempts: {(sweep_id, agent): [every written attempt's row]} (infra errors included).
    """

    rows: list[dict]
    applies: dict[tuple, dict[str, bool | None]]
    by_agent: dict[Key, dict[str, dict[str, list]]] = field(default_factory=dict)
    trials: dict[Key, list[dict]] = field(default_factory=dict)
    all_attempts: dict[Key, list[dict]] = field(default_factory=dict)

    def keys(self) -> list[Key]:
        """Every (sweep_id, agent) with any written attempt, sorted (None last)."""
        return sorted(set(self.trials) | set(self.all_attempts), key=sort_key)

    def agents(self, sweep_id) -> list:
        """The agents of one sweep, sorted."""
        return [a for s, a in self.keys() if s == sweep_id]

    def sweeps(self) -> list:
        """The sweeps, sorted (None last)."""
        return sorted({s for s, _ in self.keys()}, key=lambda s: sort_key((s,)))


#: The trials columns the analysis reads (the others, e.g. output tails, are never turned into
#: Python objects: at 100,000 trials that is most of the time).
COLUMNS = (
    "sweep_id", "trial_id", "attempt", "status", "trial_index", "task_id", "agent", "failure_owner",
    "failure_category", "c0_status", "c0_missing", "c0_total",
    *(f"c{n}_{c}" for n in range(1, 5) for c in ("status", "failure_category")),
    "c5_status", "c5_path", "c5_version", "c5_capability", "c5_underclaims", "c5_report_faults",
    "input_tokens", "output_tokens", "cost_usd", "agent_wall_time_s", "env_size_bytes", "env_size_apparent_bytes",
    # the shortcuts the probe phase records (analysis.sections.shortcuts)
    "c1_witness", "c3_witness", "c4_witness", "repo_restored_files", "repo_head_moved", "c0_unowned",
    "python_path_kind", "startup_hooks", "suspicious_actions",
)


def collect(trials: pa.Table, tasks: list[TaskSpec] | None = None) -> RunOutcomes:
    """Group a trials table (TRIALS_SCHEMA or a subset of its columns, every attempt as
    `read_trials` gives it) into RunOutcomes; rows hold the COLUMNS the table has.
    Raises KeyError naming a missing identity column."""
    trials = trials.select([c for c in COLUMNS if c in trials.column_names])
    rows = current_scored(trials)
    run = RunOutcomes(rows=rows, applies=applicability(rows, tasks))
    columns = [c for c in ("sweep_id", "agent", "status", "failure_category") if c in trials.column_names]
    for attempt in trials.select(columns).to_pylist():
        run.all_attempts.setdefault((attempt.get("sweep_id"), attempt.get("agent")), []).append(attempt)
    for row in sorted(rows, key=lambda r: sort_key((r.get("task_id"), r.get("trial_index")))):
        key = (row["sweep_id"], row.get("agent"))
        run.trials.setdefault(key, []).append(row)
        stages = run.by_agent.setdefault(key, {s: {} for s in STAGES})
        applies = run.applies[(row["sweep_id"], row.get("task_id"))]
        row[OUTCOME] = {stage: outcome(row, stage) for stage in STAGES}
        for stage in STAGES:
            if applies[stage]:
                stages[stage].setdefault(row.get("task_id"), []).append(row[OUTCOME][stage])
    return run
