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

import numpy as np
import pyarrow as pa

from reb_ray.models.task import TaskSpec

from .estimators import MIN_DISCORDANT, RESAMPLES, bootstrap_mean, bootstrap_ratio, mcnemar_exact, pass_arrays, wilson
from .outcomes import FAILURE, HARDWARE, NOT_RUN, STAGES, UNKNOWN, RunOutcomes, StageTasks, collect, numbers


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


def _task_order_sums(trials: np.ndarray, successes: np.ndarray, kmax: int) -> tuple[np.ndarray, np.ndarray]:
    """The sums over tasks of each task's pass@k and pass^k curves (k = 1..kmax), added task by
    task in task order (a cumulative sum is sequential, so the floats are those of that loop),
    each distinct (trials, successes) pair's curves computed once."""
    pairs, inverse = np.unique(np.stack([trials, successes], axis=1), axis=0, return_inverse=True)
    curves = [pass_arrays(int(t), int(c), kmax) for t, c in pairs.tolist()]
    inverse = inverse.reshape(-1)
    at = np.stack([a for a, _ in curves])[inverse]
    hat = np.stack([h for _, h in curves])[inverse]
    return np.cumsum(at, axis=0)[-1], np.cumsum(hat, axis=0)[-1]


def _stage_stats(sweep_id, agent, stage: str, tasks: StageTasks, resamples: int, seed: int) -> StageStats:
    n = int(tasks.trials.sum())
    successes = int(tasks.successes.sum())
    interval = None
    if n:
        if (tasks.trials == 1).all():
            low, high = wilson(successes, n)
            interval = Interval(low, high, "wilson")
        else:
            low, high = bootstrap_ratio(tasks.successes.tolist(), tasks.trials.tolist(), resamples=resamples, seed=seed)
            interval = Interval(low, high, "task_bootstrap")
            if successes in (0, n):
                # No resample can leave 0 or 1: the Wilson interval over tasks instead, each task
                # one observation (the most correlated case, so the widest honest interval).
                low, high = wilson(len(tasks.tasks) if successes else 0, len(tasks.tasks))
                interval = Interval(low, high, "wilson_tasks")
    at_k: dict[int, float] = {}
    hat_k: dict[int, float] = {}
    if tasks.tasks:
        kmax = int(tasks.trials.min())
        at_sum, hat_sum = _task_order_sums(tasks.trials, tasks.successes, kmax)
        count = len(tasks.tasks)
        at_k = {k: float(v) / count for k, v in enumerate(at_sum.tolist(), start=1)}
        hat_k = {k: float(v) / count for k, v in enumerate(hat_sum.tolist(), start=1)}
    counts = tasks.counts
    return StageStats(sweep_id, agent, stage, tasks=len(tasks.tasks), trials=n, successes=successes,
                      failures=int(counts[FAILURE]), hardware=int(counts[HARDWARE]),
                      not_run=int(counts[NOT_RUN]), unknown=int(counts[UNKNOWN]),
                      rate=successes / n if n else None, interval=interval, pass_at_k=at_k, pass_hat_k=hat_k)


def stage_statistics(run: RunOutcomes, *, resamples: int = RESAMPLES, seed: int = 0) -> list[StageStats]:
    """StageStats for every (sweep, agent) of `run` with a scored trial and every stage of
    STAGES (a stage that applies to none of its tasks has trials 0, rate and interval None)."""
    return [_stage_stats(key[0], key[1], stage, run.stage_tasks(key, stage), resamples, seed)
            for key in run.keys() if run.has_scored(key) for stage in STAGES]


def c0_statistics(run: RunOutcomes, *, resamples: int = RESAMPLES, seed: int = 0) -> list[C0Stats]:
    """C0Stats for every (sweep, agent) of `run` with a scored trial."""
    out = []
    missing_all, missing_known = numbers(run.table, "c0_missing")
    total_all, total_known = numbers(run.table, "c0_total")
    for key in run.keys():
        rows = run.rows_of(key)
        if not len(rows):
            continue
        known = rows[missing_known[rows] & total_known[rows]]
        present, inverse = np.unique(run.task[known], return_inverse=True)
        per_missing = np.zeros(len(present), np.int64)
        per_total = np.zeros(len(present), np.int64)
        np.add.at(per_missing, inverse, missing_all[known].astype(np.int64))
        np.add.at(per_total, inverse, total_all[known].astype(np.int64))
        missing = int(per_missing.sum()) if len(present) else None
        total = int(per_total.sum()) if len(present) else None
        bounds = bootstrap_ratio(per_missing.tolist(), per_total.tolist(), resamples=resamples, seed=seed)
        interval = Interval(*bounds, "task_bootstrap") if bounds else None
        if total and missing in (0, total):  # every resample is 0 (or 1): a point says nothing; as for rates
            interval = Interval(*wilson(missing, total), "wilson_imports")
        out.append(C0Stats(key[0], key[1], tasks=len(np.unique(run.task[rows])), trials=len(rows),
                           missing=missing, total=total, fraction=missing / total if total else None,
                           interval=interval, unknown=len(rows) - len(known)))
    return out


def _solved(trials: np.ndarray, successes: np.ndarray) -> np.ndarray:
    return successes * 2 > trials


def compare(run: RunOutcomes, sweep_id, stage: str, agent_a, agent_b, *, resamples: int = RESAMPLES,
            seed: int = 0) -> Comparison:
    """Paired comparison of `agent_a` and `agent_b` on `stage` in sweep `sweep_id` (module
    docstring). Raises KeyError naming an agent with no scored trial in the sweep, or an
    unknown stage."""
    if stage not in STAGES:
        raise KeyError(f"unknown stage {stage!r}: expected one of {', '.join(STAGES)}")
    for agent in (agent_a, agent_b):
        if not run.has_scored((sweep_id, agent)):
            raise KeyError(f"agent {agent!r} has no scored trial in sweep {sweep_id!r}")
    a, b = run.stage_tasks((sweep_id, agent_a), stage), run.stage_tasks((sweep_id, agent_b), stage)
    index_a = {t: i for i, t in enumerate(a.tasks)}
    index_b = {t: i for i, t in enumerate(b.tasks)}
    shared = [t for t in a.tasks if t in index_b]  # both sorted the same way (None last)
    ia = np.array([index_a[t] for t in shared], np.int64)
    ib = np.array([index_b[t] for t in shared], np.int64)
    fa = a.successes[ia] / a.trials[ia]
    fb = b.successes[ib] / b.trials[ib]
    solved_a = _solved(a.trials[ia], a.successes[ia])
    solved_b = _solved(b.trials[ib], b.successes[ib])
    a_only = int((solved_a & ~solved_b).sum())
    b_only = int((solved_b & ~solved_a).sum())
    diffs = (fa - fb).tolist()
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
    fa, fb = fa.tolist(), fb.tolist()
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
        agents = [a for a in run.agents(sweep_id) if run.has_scored((sweep_id, a))]
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
