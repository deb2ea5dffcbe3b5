"""What the driver knows of the output directory before the first trial, read once.

A sweep's start needs the selected tasks, which of its trials are already scored, the last
attempt number of each (a resumed trial's next attempt follows it), how long earlier attempts
took (longest-first dispatch), what the sweep has already spent (the cost budget) and the
scored trials of other sweeps that a trial of the same identity may reuse. `SweepState.read`
loads the suite once, reads the sweep's resume index once and every sweep's trials rows once,
with only the columns those questions need; each question is then answered from memory, so
a resume over a large output directory scans it once instead of five times.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from reb_ray.models.sweep import SweepConfig
from reb_ray.models.task import TaskSpec
from reb_ray.results.read import last_attempt_numbers, read_trials, resume_index, scored_in
from reb_ray.suite.load import load_suite, select_tasks

#: The trials columns the start of a sweep reads from every sweep in the output directory:
#: dispatch history (agent, task_id, status, trial_wall_time_s), reuse candidates (sweep_id,
#: trial_id, attempt, status, trial_identity, reused_from, finished_at) and spend (cost_usd,
#: llm_requests, reused_from).
HISTORY_COLUMNS = ["sweep_id", "trial_id", "attempt", "status", "agent", "task_id", "trial_wall_time_s",
                   "trial_identity", "reused_from", "finished_at", "cost_usd", "llm_requests"]


def suite_tasks(config: SweepConfig) -> list[TaskSpec]:
    """The sweep's suite: a suite under the tasks root, or the Harbor tasks of `harbor:PATH`
    (reb_ray.harbor.sweep), whose agents must be kinds that run them."""
    from reb_ray.harbor.sweep import check_agents, harbor_specs, is_harbor_suite

    if is_harbor_suite(config.suite):
        check_agents(config)
        return harbor_specs(config.suite)
    return load_suite(config.suite, config.tasks_root)


@dataclass(frozen=True)
class SweepState:
    """The selected `tasks`, this sweep's resume `index` (one row per recorded attempt:
    sweep_id, trial_id, attempt, status, failure_owner) and the `history` of every sweep's
    trials rows (HISTORY_COLUMNS), as read when the sweep started."""

    sweep_id: str
    tasks: list[TaskSpec]
    index: pa.Table
    history: pa.Table

    @classmethod
    def read(cls, config: SweepConfig) -> SweepState:
        """Load the suite and read the output directory once. Raises TaskSpecError for a bad
        suite or pattern and RebRayError (one line naming the file) for an unreadable shard."""
        output = Path(config.output.dir).resolve()
        sweep_id = config.resolved_sweep_id()
        tasks = select_tasks(suite_tasks(config), config.tasks)
        return cls(sweep_id, tasks, resume_index(output, sweep_id), read_trials(output, columns=HISTORY_COLUMNS))

    @property
    def scored_ids(self) -> set[str]:
        """trial_ids of this sweep whose current attempt (`latest_attempts`) is scored."""
        return scored_in(self.index)

    @property
    def last_attempts(self) -> dict[str, int]:
        """The highest attempt number recorded per trial_id of this sweep, whatever its status."""
        return last_attempt_numbers(self.index)

    @property
    def own_rows(self) -> pa.Table:
        """This sweep's history rows (every attempt)."""
        return self.history.filter(pc.equal(self.history["sweep_id"], self.sweep_id))
