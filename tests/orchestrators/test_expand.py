"""expand: resume skips scored trials; `--rerun` runs them again and says so in the row."""

from __future__ import annotations

from reb_ray.models.sweep import SweepConfig
from reb_ray.sweep.expand import expand
from reb_ray.results.parquet_sink import ParquetSink
from reb_ray.trial.record import TrialRecorder


def test_rerun_is_recorded_in_the_spec_and_the_row(tmp_path):
    config = SweepConfig(output=tmp_path, agents=["noop"], tasks="numpy-trainer,torch-tiny", sweep_id="s")
    ParquetSink(tmp_path).write([{"sweep_id": "s", "trial_id": "noop/numpy-trainer/0", "attempt": 1,
                                  "agent": "noop", "task_id": "numpy-trainer", "status": "scored"}], [])

    specs, skipped = expand(config, image=None)
    assert (skipped, [s.trial_id for s in specs]) == (1, ["noop/torch-tiny/0"])
    assert [s.rerun for s in specs] == [False]

    specs, skipped = expand(config.updated(rerun=True), image=None)
    by_id = {s.trial_id: s for s in specs}
    assert skipped == 0 and set(by_id) == {"noop/numpy-trainer/0", "noop/torch-tiny/0"}
    again, fresh = by_id["noop/numpy-trainer/0"], by_id["noop/torch-tiny/0"]
    assert (again.rerun, again.attempt) == (True, 2)  # numbered after the scored attempt
    assert (fresh.rerun, fresh.attempt) == (False, 1)  # never scored: a first run, not a rerun
    assert TrialRecorder(again).row["rerun"] is True and TrialRecorder(fresh).row["rerun"] is False
    assert again.next_attempt().rerun is True  # an infra retry of a rerun is still a rerun


def test_an_untrusted_agent_needs_a_guarded_sandbox_or_the_opt_in(tmp_path):
    """local and rootless Podman share the node's network: only the built-in agents run there
    unless the user passes --unsafe-local; a docker sweep or the scripted sleeps need no opt-in."""
    import pytest

    from reb_ray.errors import RebRayError

    agent = "tests.helpers.scripted_agents:PoisonCacheAgent"
    for provider in ("local", "podman"):
        config = SweepConfig(output=tmp_path, agents=[agent, "noop"], tasks="numpy-trainer", sandbox=provider)
        with pytest.raises(RebRayError, match=f"the {provider} sandbox does not keep an agent from the node's network"):
            expand(config, image=None)
        specs, _ = expand(config.updated(unsafe_local=True), image=None)
        assert sorted(s.agent for s in specs) == sorted([agent, "noop"])
        assert len(expand(config.updated(agents=["noop", "heuristic"]), image=None)[0]) == 2
    for provider in ("docker", "sleep"):
        config = SweepConfig(output=tmp_path, agents=[agent], tasks="numpy-trainer", sandbox=provider)
        assert len(expand(config, image=None)[0]) == 1
