"""Rows the driver writes for attempts that wrote none carry the attempt's agent kind and model."""

from __future__ import annotations

from reb_ray.suite.load import load_suite
from reb_ray.models.sweep import SweepConfig, TrialSpec
from reb_ray.orchestrators.attempt_rows import driver_outcome, unplaceable_outcome


def _spec(agent: str, **specs) -> TrialSpec:
    config = SweepConfig(agents=[agent], agent_specs=specs, wheelhouses=[])
    return TrialSpec(sweep_id="s", agent=agent, task=load_suite("demo")[0], trial_index=0, config=config, attempt=2)


def test_a_killed_attempts_row_names_its_agent_kind_and_model():
    spec = _spec("sonnet", sonnet={"kind": "claude_code", "model": "claude-sonnet-4-5"})
    row = driver_outcome(spec, "infra_node", "the slot worker died").trial
    assert (row["agent"], row["agent_kind"], row["agent_model"], row["attempt"]) == (
        "sonnet", "claude_code", "claude-sonnet-4-5", 2)
    row = unplaceable_outcome(_spec("noop"), "needs 8 GPUs").trial
    assert (row["agent_kind"], row["agent_model"], row["failure_owner"]) == ("noop", None, "hardware")
