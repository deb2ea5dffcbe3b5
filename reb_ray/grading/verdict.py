"""The typed verdict on one stage: what its stage row says and which trials-row columns it sets.

A verdict is the only thing that carries a grade into the rows: the live probe phase
(`TrialRecorder.record`) and `reb-ray regrade` write the same verdict the same way, so the
two can never disagree on a column. Its status, stage and category are enum members
(`reb_ray.grading.vocabulary`; an unknown category raises when the verdict is made); what it
hands to a row is plain strings, so pyarrow never sees an enum. `verdicts` and `differences`
read C0..C5 back from a trials row (a regraded or re-probed row against its source).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from reb_ray.grading.vocabulary import Category, Stage, Status, category, plain


@dataclass(frozen=True)
class StageVerdict:
    """One stage's grade.

    `row`: the trials-row columns the verdict sets (e.g. c1_status, c1_exit_code,
    c1_failure_category, c1_witness); `columns`: further stage-row columns beside status, reason
    and failure_category (the witness columns of a command stage, the audited raw of C5).
    """

    stage: Stage
    status: Status
    reason: str | None = None
    failure_category: Category | None = None
    row: Mapping[str, Any] = field(default_factory=dict)
    columns: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "stage", Stage(self.stage))
        object.__setattr__(self, "status", Status(self.status))
        if self.failure_category is not None:
            object.__setattr__(self, "failure_category", category(self.failure_category))

    def trial_columns(self) -> dict[str, Any]:
        """The trials-row columns, as plain values."""
        return {key: plain(value) for key, value in self.row.items()}

    def stage_fields(self) -> dict[str, Any]:
        """The stage-row fields the verdict decides: status, reason, failure_category and `columns`."""
        return {"status": plain(self.status), "reason": self.reason, "failure_category": plain(self.failure_category),
                **{key: plain(value) for key, value in self.columns.items()}}


__all__ = ["StageVerdict", "differences", "verdicts"]


def verdicts(row: dict) -> dict[str, str | None]:
    """{stage: status} of C0..C5 in a trials row."""
    return {s: row.get(f"{s}_status") for s in ("c0", "c1", "c2", "c3", "c4", "c5")}


def differences(before: dict, after: dict) -> list[str]:
    """"c1: failure -> success" for each of C0..C5 whose status differs between two trials rows."""
    old, new = verdicts(before), verdicts(after)
    return [f"{s}: {old[s]} -> {new[s]}" for s in old if old[s] != new[s]]
