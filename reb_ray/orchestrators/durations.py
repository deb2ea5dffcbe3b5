"""How long a trial is expected to take, for longest-first dispatch (issue 12, item 1).

From earlier sweeps of the same tasks when the output directory holds them: the median
`trial_wall_time_s` of the scored attempts of the same (agent, task), else of the same task by
any agent. Otherwise the task's timeouts: the agent timeout plus the applicable runtime stages'
timeouts (an upper bound; it still orders tasks by how long they may take). Seconds.
"""

from __future__ import annotations

import statistics
from typing import Callable, Iterable

from reb_ray.models.sweep import TrialSpec


def timeout_estimate(spec: TrialSpec) -> float:
    """The agent timeout plus every applicable runtime stage's timeout, seconds."""
    stages = spec.task.stages
    return spec.config.agent_timeout_s + sum(s.timeout_s for s in (stages.cpu, stages.single_gpu, stages.multi_gpu)
                                             if s.applicable)


def probe_timeout_estimate(spec: TrialSpec) -> float:
    """The applicable runtime stages' timeouts, seconds: how long a probe phase may hold its GPUs."""
    stages = spec.task.stages
    return sum(s.timeout_s for s in (stages.cpu, stages.single_gpu, stages.multi_gpu) if s.applicable)


def history_medians(rows: Iterable[dict]) -> tuple[dict[tuple[str, str], float], dict[str, float]]:
    """({(agent, task_id): median seconds}, {task_id: median seconds}) of scored rows with a wall time.

    `rows`: trials rows (dicts with agent, task_id, status, trial_wall_time_s)."""
    by_pair: dict[tuple[str, str], list[float]] = {}
    by_task: dict[str, list[float]] = {}
    for row in rows:
        wall = row.get("trial_wall_time_s")
        if row.get("status") != "scored" or wall is None or wall <= 0:
            continue
        by_pair.setdefault((row["agent"], row["task_id"]), []).append(wall)
        by_task.setdefault(row["task_id"], []).append(wall)
    return ({k: statistics.median(v) for k, v in by_pair.items()}, {k: statistics.median(v) for k, v in by_task.items()})


def estimator(rows: Iterable[dict] = ()) -> Callable[[TrialSpec], float]:
    """A function spec -> expected seconds: the history of `rows` first, the timeouts last."""
    pairs, tasks = history_medians(rows)

    def expected(spec: TrialSpec) -> float:
        known = pairs.get((spec.agent, spec.task.id), tasks.get(spec.task.id))
        return known if known is not None else timeout_estimate(spec)

    return expected
