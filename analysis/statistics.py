"""Statistics per agent and stage, and paired comparisons of agents (intervals over tasks, since
trials of one repository are correlated).

Inputs are `analysis.outcomes.RunOutcomes` (current scored trials, stage outcomes per task,
denominators from the task spec's applicability); `run_statistics(trials)` builds them from a
trials table. The estimators are in `analysis.estimators`.

- Success rate of a stage (C0..C4, C5) = successes / trials of the tasks the stage applies to
  (the paper's rate: the agent's failures, hardware failures, unmeasured stages all count as
  not a success; they are counted apart in `hardware`, `not_run`, `unknown`). C0 succeeds when
  no baseline import is missing; C5 when the audited report holds no over-claim.
  Its 95% interval: Wilson when every task has one trial; otherwise a percentile bootstrap that
  resamples tasks (`bootstrap_ratio` of successes over trials per task), since trials of one
  repository are correlated (when all or none of the trials succeeded, where a bootstrap
  interval collapses to a point, the Wilson interval over tasks: method "wilson_tasks").
- pass@k (Chen et al. 2021) and pass^k, the means over tasks of the per-task estimators, for
  k = 1 .. the fewest trials any task of the (agent, stage) has.
- C0 missing fraction = missing imports / the baseline total, summed over trials whose
  c0_missing is known (`unknown` counts the others), with a task bootstrap interval (imports of
  one repository are correlated, so even one trial per task is not a binomial of imports);
  when no import (or every import) is missing the bootstrap collapses to a point, so the
  interval is then Wilson over the imports (`wilson_imports`).
- Paired comparison of agents A and B on a stage, over the tasks where it applies and both have
  a scored trial: difference = mean over those tasks of (A's success fraction - B's), with a
  paired task bootstrap interval; McNemar's exact test on per-task outcomes, a task counting as
  solved when more than half of the agent's trials of it succeeded (one trial: that trial). A
  note says when the comparison cannot tell the agents apart for lack of tasks: fewer than
  `MIN_DISCORDANT` tasks where exactly one agent solved it can never give p < 0.05.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations

import pyarrow as pa

from reb_ray.models.task import TaskSpec

from .estimators import MIN_DISCORDANT, RESAMPLES, bootstrap_mean, bootstrap_ratio, mcnemar_exact, pass_curves, wilson
from .outcomes import STAGES, RunOutcomes, collect


@dataclass(frozen=True)
class Interval:
    """A 95% interval; method "wilson" (one trial per task), "task_bootstrap" (tasks resampled)
    or "wilson_tasks" (several trials per task, all or none succeeded: a bootstrap cannot leave
    that bound, so Wilson over the tasks, each task one observation)."""

    low: float
    high: float
    method: str


@dataclass(frozen=True)
class StageStats:
    """One (sweep, agent, stage). tasks: applicable tasks with a scored trial; trials: the
    denominator (their scored trials); successes; hardware / not_run / unknown: non-successes
    that are not the agent's failures (failed for lack of GPUs / applicable but unmeasured /
    no status recorded); rate = successes / trials (None for no trials); interval: 95%;
    pass_at_k / pass_hat_k: {k: value} for k = 1 .. min trials per task."""

    sweep_id: str | None
    agent: str | None
    stage: str
    tasks: int
    trials: int
    successes: int
    failures: int
    hardware: int
    not_run: int
    unknown: int
    rate: float | None
    interval: Interval | None
    pass_at_k: dict[int, float] = field(default_factory=dict)
    pass_hat_k: dict[int, float] = field(default_factory=dict)


@dataclass(frozen=True)
class C0Stats:
    """C0 of one (sweep, agent): missing / total imports summed over the `trials` scored
    trials whose c0_missing and c0_total are known (`unknown`: those whose are not), fraction =
    missing / total (None when total is 0 or nothing is known), task bootstrap interval."""

    sweep_id: str | None
    agent: str | None
    tasks: int
    trials: int
    missing: int | None
    total: int | None
    fraction: float | None
    interval: Interval | None
    unknown: int


@dataclass(frozen=True)
class Comparison:
    """Agents a and b on one stage of one sweep, over `tasks` shared tasks. rate_a / rate_b:
    mean per-task success fraction; difference = rate_a - rate_b with a paired task bootstrap
    interval; a_only / b_only: tasks only a / only b solved (McNemar's discordant pairs);
    p_value: McNemar exact (None for no shared task); note: why it cannot tell them apart."""

    sweep_id: str | None
    stage: str
    agent_a: str | None
    agent_b: str | None
    tasks: int
    rate_a: float | None
    rate_b: float | None
    difference: float | None
    interval: Interval | None
    a_only: int
    b_only: int
    p_value: float | None
    note: str | None


def _stage_stats(sweep_id, agent, stage: str, per_task: dict[str, list], resamples: int, seed: int) -> StageStats:
    outcomes = [o for trials in per_task.values() for o in trials]
    successes = outcomes.count("success")
    n = len(outcomes)
    interval = None
    if n:
        if all(len(t) == 1 for t in per_task.values()):
            low, high = wilson(successes, n)
            interval = Interval(low, high, "wilson")
        else:
            tasks = list(per_task.values())
            low, high = bootstrap_ratio([t.count("success") for t in tasks], [len(t) for t in tasks],
                                        resamples=resamples, seed=seed)
            interval = Interval(low, high, "task_bootstrap")
            if successes in (0, n):
                # No resample can leave 0 or 1: the Wilson interval over tasks instead, each task
                # one observation (the most correlated case, so the widest honest interval).
                low, high = wilson(len(tasks) if successes else 0, len(tasks))
                interval = Interval(low, high, "wilson_tasks")
    at_k: dict[int, float] = {}
    hat_k: dict[int, float] = {}
    if per_task:
        kmax = min(len(t) for t in per_task.values())
        curves = [pass_curves(len(t), t.count("success"), kmax) for t in per_task.values()]
        for k in range(1, kmax + 1):
            at_k[k] = sum(at[k - 1] for at, _ in curves) / len(curves)
            hat_k[k] = sum(hat[k - 1] for _, hat in curves) / len(curves)
    return StageStats(sweep_id, agent, stage, tasks=len(per_task), trials=n, successes=successes,
                      failures=outcomes.count("failure"), hardware=outcomes.count("hardware"),
                      not_run=outcomes.count("not_run"), unknown=outcomes.count(None),
                      rate=successes / n if n else None, interval=interval, pass_at_k=at_k, pass_hat_k=hat_k)


def stage_statistics(run: RunOutcomes, *, resamples: int = RESAMPLES, seed: int = 0) -> list[StageStats]:
    """StageStats for every (sweep, agent) of `run` with a scored trial and every stage of
    STAGES (a stage that applies to none of its tasks has trials 0, rate and interval None)."""
    return [_stage_stats(key[0], key[1], stage, run.by_agent[key][stage], resamples, seed)
            for key in run.keys() if key in run.by_agent for stage in STAGES]


def c0_statistics(run: RunOutcomes, *, resamples: int = RESAMPLES, seed: int = 0) -> list[C0Stats]:
    """C0Stats for every (sweep, agent) of `run` with a scored trial."""
    out = []
    for key in run.keys():
        rows = run.trials.get(key)
        if not rows:
            continue
        per_task: dict[str, list[int]] = {}
        unknown = 0
        for row in rows:
            if row.get("c0_missing") is None or row.get("c0_total") is None:
                unknown += 1
                continue
            sums = per_task.setdefault(row.get("task_id"), [0, 0])
            sums[0] += row["c0_missing"]
            sums[1] += row["c0_total"]
        missing = sum(m for m, _ in per_task.values()) if per_task else None
        total = sum(t for _, t in per_task.values()) if per_task else None
        bounds = bootstrap_ratio([m for m, _ in per_task.values()], [t for _, t in per_task.values()],
                                 resamples=resamples, seed=seed)
        interval = Interval(*bounds, "task_bootstrap") if bounds else None
        if total and missing in (0, total):  # every resample is 0 (or 1): a point says nothing; as for rates
            interval = Interval(*wilson(missing, total), "wilson_imports")
        out.append(C0Stats(key[0], key[1], tasks=len({r.get("task_id") for r in rows}), trials=len(rows),
                           missing=missing, total=total, fraction=missing / total if total else None,
                           interval=interval, unknown=unknown))
    return out


def _solved(trials: list) -> bool:
    return trials.count("success") * 2 > len(trials)


def compare(run: RunOutcomes, sweep_id, stage: str, agent_a, agent_b, *, resamples: int = RESAMPLES,
            seed: int = 0) -> Comparison:
    """Paired comparison of `agent_a` and `agent_b` on `stage` in sweep `sweep_id` (module
    docstring). Raises KeyError naming an agent with no scored trial in the sweep, or an
    unknown stage."""
    if stage not in STAGES:
        raise KeyError(f"unknown stage {stage!r}: expected one of {', '.join(STAGES)}")
    for agent in (agent_a, agent_b):
        if (sweep_id, agent) not in run.by_agent:
            raise KeyError(f"agent {agent!r} has no scored trial in sweep {sweep_id!r}")
    a, b = run.by_agent[(sweep_id, agent_a)][stage], run.by_agent[(sweep_id, agent_b)][stage]
    shared = sorted(set(a) & set(b), key=lambda t: (t is None, t or ""))
    fa = [a[t].count("success") / len(a[t]) for t in shared]
    fb = [b[t].count("success") / len(b[t]) for t in shared]
    a_only = sum(_solved(a[t]) and not _solved(b[t]) for t in shared)
    b_only = sum(_solved(b[t]) and not _solved(a[t]) for t in shared)
    diffs = [x - y for x, y in zip(fa, fb)]
    bounds = bootstrap_mean(diffs, resamples=resamples, seed=seed)
    note = None
    if not shared:
        note = "no shared task: nothing to compare"
    elif len(shared) < MIN_DISCORDANT:
        note = (f"too few tasks to tell the agents apart: {len(shared)} shared, and McNemar's exact test"
                f" cannot reach p < 0.05 with fewer than {MIN_DISCORDANT} tasks where they differ")
    elif a_only + b_only < MIN_DISCORDANT:
        note = (f"too few tasks to tell the agents apart: they differ on {a_only + b_only} of {len(shared)}"
                f" shared tasks; McNemar's exact test needs {MIN_DISCORDANT} to reach p < 0.05")
    return Comparison(sweep_id, stage, agent_a, agent_b, tasks=len(shared),
                      rate_a=sum(fa) / len(fa) if fa else None, rate_b=sum(fb) / len(fb) if fb else None,
                      difference=sum(diffs) / len(diffs) if diffs else None,
                      interval=Interval(*bounds, "task_bootstrap") if bounds else None,
                      a_only=a_only, b_only=b_only, p_value=mcnemar_exact(a_only, b_only) if shared else None,
                      note=note)


def all_comparisons(run: RunOutcomes, stages: tuple[str, ...] = STAGES, *, resamples: int = RESAMPLES,
                    seed: int = 0) -> list[Comparison]:
    """`compare` for every pair of agents (sorted; a before b) with scored trials in the same
    sweep, on every stage of `stages`."""
    out = []
    for sweep_id in run.sweeps():
        agents = [a for a in run.agents(sweep_id) if (sweep_id, a) in run.by_agent]
        for a, b in combinations(agents, 2):
            out.extend(compare(run, sweep_id, s, a, b, resamples=resamples, seed=seed) for s in stages)
    return out


@dataclass(frozen=True)
class RunStatistics:
    """Everything above for one run: stages, c0 and the run's outcomes (for `compare`)."""

    run: RunOutcomes
    stages: list[StageStats]
    c0: list[C0Stats]

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {(s.sweep_id, s.agent, s.stage): s for s in self.stages})

    def stage(self, sweep_id, agent, stage: str) -> StageStats:
        """The StageStats of (sweep_id, agent, stage). Raises KeyError when absent."""
        try:
            return self._index[(sweep_id, agent, stage)]
        except KeyError:
            raise KeyError(f"no statistics for sweep {sweep_id!r}, agent {agent!r}, stage {stage!r}") from None


def run_statistics(trials: pa.Table, tasks: list[TaskSpec] | None = None, *, resamples: int = RESAMPLES,
                   seed: int = 0) -> RunStatistics:
    """Statistics of a trials table (every attempt, as `read_trials` or
    `analysis.load.load_trials(..., all_attempts=True)` gives it; the current scored attempts
    are picked here). `tasks`: the task specs, when at hand, for applicability.
    Raises KeyError naming a missing identity column."""
    run = collect(trials, tasks)
    return RunStatistics(run, stage_statistics(run, resamples=resamples, seed=seed),
                         c0_statistics(run, resamples=resamples, seed=seed))
