"""Expected trial durations for longest-first dispatch (issue 12, item 1): pure."""

from __future__ import annotations

import pytest

from reb_ray.models.sweep import SweepConfig, TrialSpec
from reb_ray.suite.load import load_suite
from reb_ray.scheduling.durations import estimator, table_medians, timeout_estimate
from reb_ray.results.parquet_sink import rows_to_table
from reb_ray.results.schema import TRIALS_SCHEMA


def _spec(agent: str, task_id: str) -> TrialSpec:
    config = SweepConfig(agents=[agent], agent_timeout_s=600)
    task = next(t for t in load_suite("demo", None) if t.id == task_id)
    return TrialSpec(sweep_id="s", agent=agent, task=task, trial_index=0, config=config)


ROWS = [
        {"agent": "noop", "task_id": "numpy-trainer", "status": "scored", "trial_wall_time_s": 10.0},
        {"agent": "noop", "task_id": "numpy-trainer", "status": "scored", "trial_wall_time_s": 30.0},
        {"agent": "noop", "task_id": "numpy-trainer", "status": "scored", "trial_wall_time_s": 20.0},
        {"agent": "noop", "task_id": "numpy-trainer", "status": "infra_error", "trial_wall_time_s": 999.0},
        {"agent": "heuristic", "task_id": "torch-tiny", "status": "scored", "trial_wall_time_s": 70.0},
        {"agent": "heuristic", "task_id": "pyproject-extra", "status": "scored", "trial_wall_time_s": None},
]


def _table(rows: list[dict]):
    full = [{**r, "sweep_id": "s", "trial_id": f"t{i}", "attempt": 1} for i, r in enumerate(rows)]
    return rows_to_table(full, TRIALS_SCHEMA)


@pytest.mark.parametrize("source", ["rows", "arrow"])
def test_earlier_sweeps_first_then_the_task_by_any_agent_then_the_timeouts(source):
    """The same answer from row dicts and from the trials table the sweep reads (a million
    earlier rows are read as Arrow columns, no dicts)."""
    expected = estimator(ROWS) if source == "rows" else estimator(medians=table_medians(_table(ROWS)))
    assert expected(_spec("noop", "numpy-trainer")) == 20.0  # the median of its scored attempts
    assert expected(_spec("noop", "torch-tiny")) == 70.0  # the same task, by another agent
    spec = _spec("noop", "pyproject-extra")  # unknown (a null wall time is not a duration)
    assert expected(spec) == timeout_estimate(spec) == 600 + spec.task.stages.cpu.timeout_s  # CPU-only task


def test_the_arrow_medians_are_the_scored_attempts_with_a_wall_time():
    assert table_medians(_table(ROWS)) == ({("noop", "numpy-trainer"): 20.0, ("heuristic", "torch-tiny"): 70.0},
                                           {"numpy-trainer": 20.0, "torch-tiny": 70.0})


def test_a_probe_phase_holds_its_gpus_for_c2_too():
    """torch-tiny keeps C2 (one GPU): its probe phase may hold the GPU for C1's timeout and C2's
    bound; numpy-trainer opts out of C2 and needs no GPU at all."""
    from reb_ray.scheduling.durations import probe_timeout_estimate
    from reb_ray.probing.c2 import C2_TIMEOUT_S

    tiny, numpy = _spec("noop", "torch-tiny"), _spec("noop", "numpy-trainer")
    assert tiny.task.gpus_needed == 1 and numpy.task.gpus_needed == 0
    assert probe_timeout_estimate(tiny) == tiny.task.stages.cpu.timeout_s + C2_TIMEOUT_S
    assert probe_timeout_estimate(numpy) == numpy.task.stages.cpu.timeout_s
