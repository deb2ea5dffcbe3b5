"""One pass over a run: statistics, cost, failures and honesty together (what `reb-ray report`
prints and the HTML report will show), computed from one read of the datasets.

`analyze_run(output_dir)` reads through `reb_ray.results.read` (the trials table, and of the
stages table only the columns the failure and honesty analysis need, not the logs); `analyze`
takes tables already read.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from reb_ray.models.task import TaskSpec
from reb_ray.results.read import read_stages, read_trials

from .cost import AgentCost, Finding, Frontier, agent_costs, frontiers, token_findings
from .deviations import SweepDeviations, run_deviations
from .estimators import RESAMPLES
from .failures import FailureCount, Honesty, failure_counts, honesty, unscored_attempts
from .statistics import RunStatistics, run_statistics

#: The stages columns the analysis reads.
STAGE_COLUMNS = ["sweep_id", "trial_id", "attempt", "stage", "status", "failure_category", "raw"]


@dataclass(frozen=True)
class Analysis:
    """A run analysed: `stats` (analysis.statistics), `costs` per agent, cost and token
    `frontiers` per stage, `findings` (spend without better success), `failures` per stage,
    owner and category, `honesty` (C5) and `unscored` attempts per agent; `seed` and
    `resamples` of the bootstrap intervals; `deviations` per sweep: the stages that differ on
    purpose from the paper's release (analysis.deviations), empty when not looked up."""

    stats: RunStatistics
    costs: list[AgentCost]
    frontiers: list[Frontier]
    findings: list[Finding]
    failures: list[FailureCount]
    honesty: list[Honesty]
    unscored: dict[tuple, Counter]
    seed: int
    resamples: int
    deviations: dict[str, SweepDeviations] = field(default_factory=dict)


def analyze(trials: pa.Table, stages: pa.Table | None = None, tasks: list[TaskSpec] | None = None, *,
            seed: int = 0, resamples: int = RESAMPLES, deviations: dict[str, SweepDeviations] | None = None) -> Analysis:
    """Analyse a trials table (every attempt, as read_trials gives it) and optionally its
    stages table (any attempts; STAGE_COLUMNS at least). `tasks`: the task specs for
    applicability, when at hand. `deviations`: `analysis.deviations.run_deviations` of the run,
    for the report's note. Raises KeyError naming a missing identity column."""
    stats = run_statistics(trials, tasks, seed=seed, resamples=resamples)
    costs = agent_costs(stats.run)
    return Analysis(stats=stats, costs=costs,
                    frontiers=frontiers(stats, costs, "cost_usd") + frontiers(stats, costs, "tokens"),
                    findings=token_findings(stats, costs, seed=seed), failures=failure_counts(stats.run, stages),
                    honesty=honesty(stats.run, stages), unscored=unscored_attempts(stats.run),
                    seed=seed, resamples=resamples, deviations=deviations or {})


def analyze_run(output_dir: Path, sweep_id: str | None = None, tasks: list[TaskSpec] | None = None, *,
                seed: int = 0, resamples: int = RESAMPLES, tasks_root: Path | None = None) -> Analysis:
    """`analyze` the run under `output_dir` (one sweep or all), with the deviations of its tasks
    (from `tasks`, else the suites under `tasks_root`, default the bundled tasks/). Raises
    RebRayError for an unreadable or foreign results shard."""
    output_dir = Path(output_dir)
    trials = read_trials(output_dir, sweep_id)
    return analyze(trials, read_stages(output_dir, sweep_id, columns=STAGE_COLUMNS), tasks, seed=seed,
                   resamples=resamples, deviations=run_deviations(output_dir, trials, tasks_root, tasks))
