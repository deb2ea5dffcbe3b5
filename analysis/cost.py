"""Cost and efficiency per trial and per agent (USD and tokens; unknown cost is never 0).

Units: tokens = input + output tokens the node's metering proxy counted (`input_tokens` +
`output_tokens`; a trial missing either has no token count), cost in USD (`cost_usd`, the
price table's), agent time in seconds (`agent_wall_time_s`), env size in bytes
(`env_size_bytes`). Unknown stays None, never 0: a sum or mean is over the trials that know the
value (`*_known` says how many), and None when none does, so a run with no priced trial costs
None, not $0.

- Per success of C1, C3 and C4 (the command stages): the cost (tokens) of the agent's scored
  trials of the tasks the stage applies to, over those that know it, divided by the stage's
  successes among those same trials; None when none knows it or none succeeded.
- The Pareto frontier per stage, on (mean cost per trial, success rate): the agents no other
  agent beats on both (as cheap or cheaper and at least as successful, one strictly); agents
  with unknown cost are left out and listed apart. The same on tokens per trial.
- Findings (`token_findings`): an agent that spends at least FINDING_RATIO times another's mean
  tokens (or cost) per trial without being better on any stage C1..C4 (a stage where the mean
  paired difference is positive and its bootstrap interval lies wholly above 0). The paper's observation is the model: one agent
  spent about 20x another's tokens for no better success.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .outcomes import SUCCESS, RunOutcomes, StageTasks, numbers
from .statistics import RunStatistics, compare

#: The stages a cost per success is given for.
COST_STAGES = ("c1", "c3", "c4")
#: The stages "better success" is judged on in a finding.
SUCCESS_STAGES = ("c1", "c2", "c3", "c4")
#: A spend ratio at or above which a no-better agent is a finding.
FINDING_RATIO = 10.0


def trial_tokens(row: dict) -> int | None:
    """input_tokens + output_tokens of a trials row; None when either is unknown."""
    i, o = row.get("input_tokens"), row.get("output_tokens")
    return None if i is None or o is None else i + o


def _mean(values: list) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def _sum(values: list):
    known = [v for v in values if v is not None]
    return sum(known) if known else None


@dataclass(frozen=True)
class PerSuccess:
    """Cost and tokens per success of one stage: successes among the stage's trials (`trials`:
    those whose task applies the stage), cost (USD) and tokens per success (None: unknown or no
    success)."""

    successes: int
    cost_usd: float | None
    tokens: float | None
    trials: int = 0


@dataclass(frozen=True)
class AgentCost:
    """Cost and efficiency of one (sweep, agent) over its `trials` scored trials (module
    docstring for units and unknowns)."""

    sweep_id: str | None
    agent: str | None
    trials: int
    tokens_sum: int | None
    tokens_known: int
    tokens_per_trial: float | None
    cost_usd_sum: float | None
    cost_known: int
    cost_per_trial: float | None
    agent_time_mean_s: float | None
    agent_time_known: int
    env_size_mean_bytes: float | None
    env_size_known: int
    per_success: dict[str, PerSuccess] = field(default_factory=dict)


def trial_costs(run: RunOutcomes) -> list[dict]:
    """One dict per scored current trial: sweep_id, agent, task_id, trial_index, input_tokens,
    output_tokens, tokens, cost_usd, agent_wall_time_s, env_size_bytes (None: unknown)."""
    out = []
    for key in run.keys():
        for row in run.trials.get(key, []):
            out.append({"sweep_id": key[0], "agent": key[1], "task_id": row.get("task_id"),
                        "trial_index": row.get("trial_index"), "input_tokens": row.get("input_tokens"),
                        "output_tokens": row.get("output_tokens"), "tokens": trial_tokens(row),
                        "cost_usd": row.get("cost_usd"), "agent_wall_time_s": row.get("agent_wall_time_s"),
                        "env_size_bytes": row.get("env_size_bytes")})
    return out


class _Spend:
    """The per-trial spend columns of a run's scored trials: values and known masks."""

    def __init__(self, run: RunOutcomes) -> None:
        inputs, in_known = numbers(run.table, "input_tokens")
        outputs, out_known = numbers(run.table, "output_tokens")
        self.tokens = (inputs.astype(np.int64) + outputs.astype(np.int64), in_known & out_known)
        self.cost = numbers(run.table, "cost_usd")
        self.time = numbers(run.table, "agent_wall_time_s")
        self.size = numbers(run.table, "env_size_bytes")


def _known(column: tuple[np.ndarray, np.ndarray], rows: np.ndarray) -> list:
    """The known values of `column` at `rows`, in that order, as Python numbers."""
    values, known = column
    return values[rows[known[rows]]].tolist()


def _total(values: list):
    return sum(values) if values else None


def _average(values: list) -> float | None:
    return sum(values) / len(values) if values else None


def _per_success(run: RunOutcomes, spend: _Spend, rows: np.ndarray, stage: str) -> PerSuccess:
    applies = rows[run.applies[stage][rows]]
    success = run.codes[stage][applies] == SUCCESS

    def per(column: tuple[np.ndarray, np.ndarray]) -> float | None:
        known = column[1][applies]
        wins = int(success[known].sum())
        return sum(column[0][applies[known]].tolist()) / wins if known.any() and wins else None

    return PerSuccess(successes=int(success.sum()), cost_usd=per(spend.cost), tokens=per(spend.tokens),
                      trials=len(applies))


def agent_costs(run: RunOutcomes) -> list[AgentCost]:
    """AgentCost for every (sweep, agent) with a scored trial, sorted. Sums and means run over
    the agent's trials in task then trial order."""
    out = []
    spend = _Spend(run)
    for key in run.keys():
        rows = run.rows_of(key)
        if not len(rows):
            continue
        tokens, costs = _known(spend.tokens, rows), _known(spend.cost, rows)
        times, sizes = _known(spend.time, rows), _known(spend.size, rows)
        out.append(AgentCost(
            key[0], key[1], trials=len(rows),
            tokens_sum=_total(tokens), tokens_known=len(tokens), tokens_per_trial=_average(tokens),
            cost_usd_sum=_total(costs), cost_known=len(costs), cost_per_trial=_average(costs),
            agent_time_mean_s=_average(times), agent_time_known=len(times),
            env_size_mean_bytes=_average(sizes), env_size_known=len(sizes),
            per_success={s: _per_success(run, spend, rows, s) for s in COST_STAGES}))
    return out


def pareto_frontier(points: dict) -> list:
    """The keys of `points` ({key: (cost, success)}; lower cost and higher success are better)
    that no other point dominates, sorted by cost then key. A point with a None coordinate is
    left out."""
    known = {k: p for k, p in points.items() if None not in p}
    front = [k for k, (c, s) in known.items()
             if not any(c2 <= c and s2 >= s and (c2, s2) != (c, s) for c2, s2 in known.values())]
    return sorted(front, key=lambda k: (known[k][0], str(k)))


@dataclass(frozen=True)
class Frontier:
    """The Pareto frontier of one sweep and stage on `metric` ("cost_usd" per trial or
    "tokens" per trial): `agents` on it (cheapest first), `unknown`: agents with trials of the
    stage left out for an unknown metric (an agent with no trial of the stage is neither)."""

    sweep_id: str | None
    stage: str
    metric: str
    agents: list
    unknown: list


def frontiers(stats: RunStatistics, costs: list[AgentCost], metric: str = "cost_usd",
              stages: tuple[str, ...] = SUCCESS_STAGES) -> list[Frontier]:
    """Frontier for every sweep and stage of `stages` on `metric` ("cost_usd" or "tokens")."""
    spend = {(c.sweep_id, c.agent): c.cost_per_trial if metric == "cost_usd" else c.tokens_per_trial for c in costs}
    out = []
    for sweep_id in stats.run.sweeps():
        for stage in stages:
            points, unknown = {}, []
            for c in costs:
                if c.sweep_id != sweep_id:
                    continue
                rate = stats.stage(sweep_id, c.agent, stage).rate
                if rate is None:  # the stage applied to none of its trials: no point, nothing unknown
                    continue
                if spend[(sweep_id, c.agent)] is None:
                    unknown.append(c.agent)
                else:
                    points[c.agent] = (spend[(sweep_id, c.agent)], rate)
            out.append(Frontier(sweep_id, stage, metric, pareto_frontier(points), unknown))
    return out


@dataclass(frozen=True)
class Finding:
    """`agent` spent `ratio` times `baseline`'s mean `metric` ("tokens" or "cost_usd") per
    trial (`spent` vs `baseline_spent`) and was better on no stage of `stages` ({stage:
    (agent's rate, baseline's rate)}); `worse_or_equal`: its rate is at most the baseline's on
    every one of them (else it is higher somewhere, within the paired interval's noise)."""

    sweep_id: str | None
    metric: str
    agent: str | None
    baseline: str | None
    spent: float
    baseline_spent: float
    ratio: float
    stages: dict[str, tuple[float, float]]
    worse_or_equal: bool


def _mean_difference(a: StageTasks, b: StageTasks) -> float | None:
    fa = {t: s / n for t, n, s in zip(a.tasks, a.trials.tolist(), a.successes.tolist())}
    fb = {t: s / n for t, n, s in zip(b.tasks, b.trials.tolist(), b.successes.tolist())}
    shared = [t for t in fa if t in fb]
    if not shared:
        return None
    return sum(fa[t] - fb[t] for t in shared) / len(shared)


def _better_somewhere(stats: RunStatistics, sweep_id, agent, baseline, seed: int) -> bool:
    """Whether `agent` is better than `baseline` on some stage of SUCCESS_STAGES: a positive
    mean paired difference whose bootstrap interval lies wholly above 0 (`compare`; the
    bootstrap is skipped where the difference is not positive, which can never be better)."""
    for stage in SUCCESS_STAGES:
        diff = _mean_difference(stats.run.stage_tasks((sweep_id, agent), stage),
                                stats.run.stage_tasks((sweep_id, baseline), stage))
        if diff is None or diff <= 0:
            continue
        cmp = compare(stats.run, sweep_id, stage, agent, baseline, seed=seed)
        if cmp.interval is not None and cmp.interval.low > 0:
            return True
    return False


def token_findings(stats: RunStatistics, costs: list[AgentCost], ratio: float = FINDING_RATIO,
                   seed: int = 0) -> list[Finding]:
    """Findings (module docstring), on tokens and on cost: per sweep and metric, each spending
    agent once, against the agent it out-spends most among those it is not better than;
    sorted by sweep, metric (tokens first), then ratio, highest first."""
    out = []
    for metric in ("tokens", "cost_usd"):
        for sweep_id in stats.run.sweeps():
            spend = {c.agent: (c.tokens_per_trial if metric == "tokens" else c.cost_per_trial)
                     for c in costs if c.sweep_id == sweep_id}
            found = []
            for agent, spent in spend.items():
                best = None
                # the most out-spent first: the first the agent is not better than is the one
                candidates = sorted(((b, base) for b, base in spend.items() if b != agent and base),
                                    key=lambda c: (c[1], str(c[0])))
                for baseline, base in candidates:
                    if spent is None or spent < ratio * base:
                        break
                    if not _better_somewhere(stats, sweep_id, agent, baseline, seed):
                        best = (baseline, spent / base)
                        break
                if best is None:
                    continue
                rates = {}
                for stage in SUCCESS_STAGES:
                    a, b = stats.stage(sweep_id, agent, stage), stats.stage(sweep_id, best[0], stage)
                    if a.rate is not None and b.rate is not None:
                        rates[stage] = (a.rate, b.rate)
                found.append(Finding(sweep_id, metric, agent, best[0], spent, spend[best[0]], best[1], rates,
                                     all(x <= y for x, y in rates.values())))
            out.extend(sorted(found, key=lambda f: -f.ratio))
    return out
