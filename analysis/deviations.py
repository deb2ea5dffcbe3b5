"""The stages of a run's tasks that differ on purpose from the paper's release, for the report's note.

A stage's `deviation` (task.toml) says how its command or success rule differs from the
release's script and why; a number measured on such a stage is not the paper's number for it.
The rows record each trial's suite and task id but not the spec, so `run_deviations` reads the
specs from the tasks root (the bundled tasks/ by default) and keeps a task's deviations only
when its spec is the one the sweep ran: its digest equals the `task.<id>` digest of the sweep's
stored identity (`reb_ray.sweep.identity`). A task whose spec is not there or has changed since
is listed as unknown, never as following the release. A run without a stored identity (older
than the identity file) takes the specs as they are.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from reb_ray.suite.load import load_suite
from reb_ray.models.task import TaskSpec, TaskSpecError
from reb_ray.sweep.identity import identity_path, task_digest


@dataclass(frozen=True)
class SweepDeviations:
    """One sweep's tasks: `stages` {task id: {stage name: deviation}} for the tasks whose spec is
    known and has one (stage names cpu, single_gpu, multi_gpu), `unknown` the task ids whose spec
    is missing or changed since the sweep ran, `suites` the suites the sweep's rows name."""

    stages: dict[str, dict[str, str]] = field(default_factory=dict)
    unknown: list[str] = field(default_factory=list)
    suites: list[str] = field(default_factory=list)


def _stored_digests(output_dir: Path, sweep_id: str) -> dict[str, object] | None:
    """The sweep's stored identity, or None when it has none (or it is unreadable)."""
    try:
        return json.loads(identity_path(output_dir, sweep_id).read_text())["identity"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def run_deviations(output_dir: Path, trials: pa.Table, tasks_root: Path | None = None,
                   tasks: list[TaskSpec] | None = None) -> dict[str, SweepDeviations]:
    """{sweep id: SweepDeviations} for every sweep in `trials` (rows with sweep_id, suite,
    task_id). `tasks`: the specs when at hand (else loaded per suite from `tasks_root`); either
    way a spec counts only when it is the one the sweep ran (module docstring)."""
    rows = trials.select(["sweep_id", "suite", "task_id"]).to_pylist()
    loaded: dict[tuple[str, str], TaskSpec] = {}
    if tasks is not None:
        loaded = {(t.suite, t.id): t for t in tasks}
    else:
        for suite in sorted({r["suite"] for r in rows if r["suite"]}):
            try:
                loaded.update({(suite, t.id): t for t in load_suite(suite, tasks_root)})
            except TaskSpecError:
                continue  # a suite that is not under the tasks root: its tasks are unknown
    out: dict[str, SweepDeviations] = {}
    for sweep_id in sorted({r["sweep_id"] for r in rows}):
        stored = _stored_digests(Path(output_dir), sweep_id)
        mine = sorted({(r["suite"], r["task_id"]) for r in rows if r["sweep_id"] == sweep_id}, key=lambda k: (k[1] is None, k[1] or "", k[0] is None, k[0] or ""))
        stages, unknown = {}, []
        for suite, task_id in mine:
            spec = loaded.get((suite, task_id))
            ran = None if stored is None else stored.get(f"task.{task_id}")
            if spec is None or (ran is not None and ran != task_digest(spec)):
                unknown.append(task_id)
            elif spec.deviations:
                stages[task_id] = spec.deviations
        out[sweep_id] = SweepDeviations(stages, unknown, sorted({s for s, _ in mine if s}))
    return out
