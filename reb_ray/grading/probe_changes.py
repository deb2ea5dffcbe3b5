"""A command stage that ran while a tracked file of the repository changed is the agent's failure.

The harness reads the repository's tracked files from outside the sandbox when the probe phase
begins and again after its last stage (`reb_ray.trial.repo_outside`). A file that changed in
between was changed by code of the agent's (the probes write none, no honest task command
does): a daemon that swapped the entry file for the stages and put it back would leave the
file as pinned, so only what stays changed is seen, and whichever command stage ran with it is
not evidence of the pinned code. A command stage (C1, C3, C4) that succeeded then fails with
`repo_changed_in_probes`, the files named; one that failed by its own rule keeps its category.
Pure, so the live probe phase and `reb-ray regrade` (the trials row's `repo_probe_changed`)
reach the same verdict.
"""

from __future__ import annotations

from dataclasses import replace

from reb_ray.grading.verdict import StageVerdict
from reb_ray.grading.vocabulary import Category, Stage, Status

CHARGED_STAGES = (Stage.C1, Stage.C3, Stage.C4)
FILES_NAMED = 5


def charge_probe_changes(verdict: StageVerdict, changed: list[str] | None) -> StageVerdict:
    """`verdict` as a failure `repo_changed_in_probes` when it is a command stage's success and
    `changed` (tracked paths changed during the probe phase) is not empty; else `verdict`."""
    if not changed or verdict.stage not in CHARGED_STAGES or verdict.status is not Status.SUCCESS:
        return verdict
    named = ", ".join(changed[:FILES_NAMED]) + (f" and {len(changed) - FILES_NAMED} more" if len(changed) > FILES_NAMED else "")
    reason = (f"tracked file(s) of the repository changed while the probe phase ran (read from outside the "
              f"sandbox): {named}; the stage ran with them, not with the pinned commit")
    row = dict(verdict.row)
    row[f"{verdict.stage}_status"] = Status.FAILURE.value
    row[f"{verdict.stage}_failure_category"] = Category.REPO_CHANGED_IN_PROBES.value
    return replace(verdict, status=Status.FAILURE, reason=reason, failure_category=Category.REPO_CHANGED_IN_PROBES,
                   row=row)


__all__ = ["charge_probe_changes"]
