"""How long a trial is expected to take, in seconds, for longest-first dispatch.

From earlier sweeps of the same tasks when the output directory holds them: the median
`trial_wall_time_s` of the scored attempts of the same (agent, task), else of the same task by
any agent. Otherwise the task's timeouts: the agent timeout plus the applicable runtime stages'
timeouts (an upper bound; it still orders tasks by how long they may take). Seconds.
"""

from __future__ import annotations

import statistics
from typing import Callable, Iterable

import pyarrow as pa
import pyarrow.compute as pc

from reb_ray.models.sweep import TrialSpec
from reb_ray.probing.c2 import C2_TIMEOUT_S

Medians = tuple[dict[tuple[str, str], float], dict[str, float]]


def timeout_estimate(spec: TrialSpec) -> float:
    """The agent timeout plus every applicable runtime stage's timeout, seconds."""
    stages = spec.task.stages
    return spec.config.agent_timeout_s + sum(s.timeout_s for s in (stages.cpu, stages.single_gpu, stages.multi_gpu)
                                             if s.applicable)


def probe_timeout_estimate(spec: TrialSpec) -> float:
    """The applicable runtime stages' timeouts, seconds: how long a probe phase may hold its GPUs.
    C2 counts with its probe's bound (C2_TIMEOUT_S): it holds a GPU too, and a task whose only
    GPU stage is C2 would otherwise be estimated to need it for no time at all."""
    stages = spec.task.stages
    c2 = C2_TIMEOUT_S if stages.cuda.applicable else 0.0
    return c2 + sum(s.timeout_s for s in (stages.cpu, stages.single_gpu, stages.multi_gpu) if s.applicable)


def history_medians(rows: Iterable[dict]) -> Medians:
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


def table_medians(table: pa.Table) -> Medians:
    """`history_medians` of a trials table (columns agent, task_id, status, trial_wall_time_s),
    computed in Arrow: a driver resuming next to a million earlier rows builds no row dicts.
    Medians are Arrow's t-digest `approximate_median` (exact for a few values; an ordering
    estimate needs no more)."""
    wall = table["trial_wall_time_s"]
    scored = table.filter(pc.and_(pc.equal(table["status"], "scored"), pc.greater(wall, 0)))

    def medians(keys: list[str]) -> dict:
        grouped = scored.group_by(keys).aggregate([("trial_wall_time_s", "approximate_median")])
        names = [grouped[k].to_pylist() for k in keys]
        values = grouped["trial_wall_time_s_approximate_median"].to_pylist()
        return {(tuple(k) if len(keys) > 1 else k[0]): v for k, v in zip(zip(*names), values)}

    return medians(["agent", "task_id"]), medians(["task_id"])


def estimator(rows: Iterable[dict] = (), medians: Medians | None = None) -> Callable[[TrialSpec], float]:
    """A function spec -> expected seconds: the history (`medians`, else those of `rows`)
    first, the timeouts last."""
    pairs, tasks = medians if medians is not None else history_medians(rows)

    def expected(spec: TrialSpec) -> float:
        known = pairs.get((spec.agent, spec.task.id), tasks.get(spec.task.id))
        return known if known is not None else timeout_estimate(spec)

    return expected
