"""The sweep's start reads the output directory once (`SweepState`): every question it answers
from that one read equals what the per-question readers find on disk."""

from __future__ import annotations

import pytest

from reb_ray.models.sweep import SweepConfig
from reb_ray.results.read import last_attempts, read_trials, scored_trial_ids
from reb_ray.scheduling.budget import SweepBudget
from reb_ray.scheduling.durations import table_medians
from reb_ray.sweep.expand import expand
from reb_ray.sweep.state import SweepState
from reb_ray.sweep.trial_identity import plan_reuse
from tests.analysis.runs import row, write_run


def _run(tmp_path):
    write_run(tmp_path, [
        row("noop", "numpy-trainer", 1, "infra_error", sweep="s", cost_usd=0.25, llm_requests=2, trial_wall_time_s=5.0),
        row("noop", "numpy-trainer", 2, "scored", sweep="s", cost_usd=0.5, llm_requests=3, trial_wall_time_s=7.0,
            trial_identity="id-a"),
        row("noop", "torch-tiny", 1, "interrupted", sweep="s", trial_wall_time_s=1.0),
        row("noop", "torch-tiny", 1, "scored", sweep="old", cost_usd=9.0, llm_requests=1, trial_wall_time_s=11.0,
            trial_identity="id-b"),
    ])
    return SweepConfig(output=tmp_path, agents=["noop"], tasks="numpy-trainer,torch-tiny", sweep_id="s")


def test_each_answer_equals_the_reader_on_disk(tmp_path):
    config = _run(tmp_path)
    state = SweepState.read(config)
    assert state.sweep_id == "s" and [t.id for t in state.tasks] == ["numpy-trainer", "torch-tiny"]
    assert state.scored_ids == scored_trial_ids(tmp_path, "s") == {"noop/numpy-trainer/0"}
    assert state.last_attempts == last_attempts(tmp_path, "s") == {"noop/numpy-trainer/0": 2, "noop/torch-tiny/0": 1}
    from_table = SweepBudget.from_table(10.0, state.own_rows)
    from_disk = SweepBudget.from_rows(10.0, tmp_path, "s")
    assert (from_table.spent_usd, from_table.unknown) == (from_disk.spent_usd, from_disk.unknown) == (pytest.approx(0.75), 0)
    assert table_medians(state.history) == table_medians(read_trials(tmp_path, columns=["agent", "task_id", "status",
                                                                                           "trial_wall_time_s"]))


def test_expand_and_reuse_give_the_same_plan_from_the_state(tmp_path):
    config = _run(tmp_path)
    state = SweepState.read(config)
    specs, skipped = expand(config, None, state)
    assert (skipped, [(s.trial_id, s.attempt) for s in specs]) == (1, [("noop/torch-tiny/0", 2)])
    assert expand(config, None)[1] == skipped
    identities = {"noop/torch-tiny/0": "id-b"}
    with_state = plan_reuse(tmp_path, "s", specs, identities, state.history)
    from_disk = plan_reuse(tmp_path, "s", specs, identities)
    assert with_state.picks == from_disk.picks == {"noop/torch-tiny/0": ("old", "noop/torch-tiny/0", 1)}
