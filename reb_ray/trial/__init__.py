"""One trial attempt on one node, without Ray: prepare the sandbox, run the agent, the steps
between the phases, the hidden probes, and the rows that record it.

`run_trial` and `TrialOutcome` are re-exported lazily, so that importing one part of the
attempt (its record, its artifacts) does not load the whole of it."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reb_ray.trial.record import TrialOutcome
    from reb_ray.trial.run import run_trial

__all__ = ["TrialOutcome", "run_trial"]


def __getattr__(name: str):
    if name == "run_trial":
        from reb_ray.trial.run import run_trial

        return run_trial
    if name == "TrialOutcome":
        from reb_ray.trial.record import TrialOutcome

        return TrialOutcome
    raise AttributeError(f"module 'reb_ray.trial' has no attribute {name!r}")
