"""The one factory of trials and stages rows for the tests and benchmarks (real columns only).

`trial_row` and `stage_row` give the identifying columns of one attempt of `agent` on `task`
(trial `index`, `attempt`, sweep `sweep`) plus `values`, which must be columns of the results
schema: a misspelt column is a ValueError naming it, never a row the sink drops silently."""

from __future__ import annotations

from reb_ray.results.schema import STAGES_SCHEMA, TRIALS_SCHEMA


def _checked(row: dict, columns: list[str], dataset: str) -> dict:
    unknown = sorted(set(row) - set(columns))
    if unknown:
        raise ValueError(f"{dataset} row: no such column(s) {', '.join(unknown)}")
    return row


def trial_row(agent: str, task: str, attempt: int = 1, status: str = "scored", *, sweep: str = "s1",
              index: int = 0, suite: str | None = None, **values) -> dict:
    """A trials row (`suite` left out when None)."""
    row = {"sweep_id": sweep, "trial_id": f"{agent}/{task}/{index}", "attempt": attempt, "trial_index": index,
           "task_id": task, "agent": agent, "status": status}
    if suite is not None:
        row["suite"] = suite
    return _checked({**row, **values}, TRIALS_SCHEMA.names, "trials")


def stage_row(agent: str, task: str, stage: str, status: str, *, attempt: int = 1, sweep: str = "s1",
              index: int = 0, **values) -> dict:
    """A stages row of `stage` with `status`."""
    row = {"sweep_id": sweep, "trial_id": f"{agent}/{task}/{index}", "attempt": attempt, "task_id": task,
           "agent": agent, "stage": stage, "status": status}
    return _checked({**row, **values}, STAGES_SCHEMA.names, "stages")
