"""Suite health: every task passes its reference and no task is passed by doing nothing.

`verify_tasks(config)` runs one real sweep of the agents `reference` (rebuilds the task's stored
recipe, reb_ray.agents.reference) and `noop` (installs nothing) over the tasks that have a
reference (`<task_dir>/reference/reference.toml`, reb_ray.sweep.references), then judges each
task from the current attempts:

- **reference**: every stage the reference recorded as passed must pass again. A recorded stage
  that is now `not_run` for `insufficient_hardware` (a GPU stage recorded on a GPU node, checked
  on a node with fewer GPUs) is unmeasured here, named in the verdict, never a break;
- **noop**: no environment stage C0..C4 that applies to the task may pass. C5 is left out: it
  audits the report's claims, and noop's report claims nothing, so its honest report passes C5
  by design, whatever the task;
- an attempt the infrastructure broke (`infra_error`, or a trial with no row) leaves the task
  `unknown`: its health was not measured.

A task's verdict is `ok` (perhaps with stages unmeasured here), `broken` (why), `unknown` (why),
or `no reference` (the task was not swept). `broken` and `unknown` make the command fail; a task
with no reference does not (most tasks of a new suite have none yet) unless none of the selected
tasks has one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from reb_ray.errors import RebRayError
from reb_ray.sweep.references import PYRAMID, read_reference

AGENTS = ("reference", "noop")


@dataclass
class TaskHealth:
    """One task's line of the health table."""

    task_id: str
    reference_stages: list[str] = field(default_factory=list)  # the stages its reference recorded as passed
    reference: str = ""  # what the reference trial did: "c0 c1 c5 passed" or why not
    noop: str = ""  # what noop passed: "passes nothing" or "passes c1"
    verdict: str = "no reference"
    reasons: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.verdict in ("broken", "unknown")

    def verdict_text(self) -> str:
        return self.verdict + (f" ({'; '.join(self.reasons)})" if self.reasons else "")


def _stage_category(row: dict, stage: str) -> str | None:
    return row.get(f"{stage}_failure_category")


def judge(task_id: str, reference: dict, ref_row: dict | None, noop_row: dict | None) -> TaskHealth:
    """The health of one task from its reference.toml and the two trials' current rows."""
    health = TaskHealth(task_id, reference_stages=list(reference["passed"]))
    broken, unknown, unmeasured = [], [], []
    if ref_row is None or ref_row.get("status") != "scored":
        why = "no row" if ref_row is None else f"{ref_row.get('status')}: {ref_row.get('failure_reason')}"
        unknown.append(f"reference trial {why}")
        health.reference = "not measured"
    else:
        passed = [s for s in reference["passed"] if ref_row.get(f"{s}_status") == "success"]
        for stage in reference["passed"]:
            if stage in passed:
                continue
            status, category = ref_row.get(f"{stage}_status"), _stage_category(ref_row, stage)
            if status == "not_run" and category == "insufficient_hardware":
                unmeasured.append(f"{stage} unmeasured here: insufficient_hardware")
            else:
                broken.append(f"reference {stage} {status}" + (f" ({category})" if category else ""))
        if broken and ref_row.get("failure_reason"):
            broken.append(f"reference trial: {ref_row['failure_reason'][:300]}")
        health.reference = (" ".join(passed) + " passed") if passed else "passes nothing"
    if noop_row is None or noop_row.get("status") != "scored":
        why = "no row" if noop_row is None else f"{noop_row.get('status')}: {noop_row.get('failure_reason')}"
        unknown.append(f"noop trial {why}")
        health.noop = "not measured"
    else:
        passes = [s for s in PYRAMID if noop_row.get(f"{s}_status") == "success"]
        broken += [f"noop passes {s}: the stage does not need the environment" for s in passes]
        health.noop = ("passes " + " ".join(passes)) if passes else "passes nothing"
    if broken:
        health.verdict, health.reasons = "broken", broken + unknown
    elif unknown:
        health.verdict, health.reasons = "unknown", unknown
    else:
        health.verdict, health.reasons = "ok", unmeasured
    return health


def verify_tasks(config, show_progress: bool = False) -> tuple[list[TaskHealth], str | None]:
    """Sweep `reference` and `noop` over `config`'s tasks that have a reference and judge each
    task. Every run measures anew: nothing is reused from other sweeps or resumed from an
    earlier run into the same output, and a changed task spec is what is being checked, not
    drift to refuse; returns (the health of every selected task, in task
    order, the sweep id; None when nothing ran). `config` is a SweepConfig whose `agents` are
    replaced. Raises RebRayError when none of the selected tasks has a reference."""
    from reb_ray.results.read import latest_attempts, read_trials
    from reb_ray.suite.load import load_suite, select_tasks
    from reb_ray.sweep.run import run_sweep

    tasks = select_tasks(load_suite(config.suite, config.tasks_root), config.tasks)
    if not tasks:
        raise RebRayError(f"suite {config.suite!r}: no task matches {config.tasks!r}")
    references = {t.id: read_reference(t.task_dir) for t in tasks}
    with_ref = [t.id for t in tasks if references[t.id] is not None]
    if not with_ref:
        raise RebRayError(f"suite {config.suite!r}: none of the selected tasks has a reference "
                          "(<task>/reference/reference.toml): make them with `reb-ray tasks reference OUTPUT`")
    sweep_config = config.updated(agents=list(AGENTS), tasks=",".join(with_ref), trials=1, fresh=True, rerun=True,
                                  allow_drift=True, verify_exports=False, keep_environments="none")
    result = run_sweep(sweep_config, show_progress=show_progress)
    rows = latest_attempts(read_trials(sweep_config.output.dir, result.sweep_id)).to_pylist()
    by_trial = {(r["agent"], r["task_id"]): r for r in rows}
    out = []
    for task in tasks:
        ref = references[task.id]
        if ref is None:
            out.append(TaskHealth(task.id, reference="-", noop="-", verdict="no reference"))
            continue
        out.append(judge(task.id, ref, by_trial.get(("reference", task.id)), by_trial.get(("noop", task.id))))
    return out, result.sweep_id


def health_table(rows: list[TaskHealth]) -> str:
    """The table `reb-ray tasks verify` prints: task, reference stages, reference, noop, verdict."""
    table = [("task", "reference stages", "reference", "noop", "verdict")]
    table += [(h.task_id, " ".join(h.reference_stages) or "-", h.reference, h.noop, h.verdict_text()) for h in rows]
    widths = [max(len(r[i]) for r in table) for i in range(4)]
    return "\n".join("  ".join([*(c.ljust(w) for c, w in zip(r[:4], widths)), r[4]]).rstrip() for r in table)
