"""The columns the grader and the recorder write are exactly the schema's: a stage row holds every
STAGES_SCHEMA column and nothing else, and the stage columns of the trials row (c0_..c5_,
env_size_, the start-up record's, the settled verdict's) are exactly the ones the grader's
verdicts set, so a grader column missing from the schema, or a schema column no grader fills,
fails here."""

from __future__ import annotations

import re

from reb_ray.grading.stage import AuditRecord, CommandRecord, GradeContext, StartupRecord, grade_stage
from reb_ray.grading.unmeasured import PROBE_STAGES, agent_failed
from reb_ray.models.sweep import SweepConfig, TrialSpec
from reb_ray.results.schema import STAGES_SCHEMA, TRIALS_SCHEMA
from reb_ray.sandbox import ExecResult
from reb_ray.suite.load import load_suite
from reb_ray.trial.record import TrialRecorder, settle_rows
from reb_ray.trial.result import StageRow, flatten

#: Trials-row columns of the start-up record (recorded, never scored).
STARTUP_COLUMNS = {"python_path_kind", "startup_hooks", "suspicious_actions", "pyright_version"}
_STAGE_FAMILY = re.compile(r"^(c[0-5]|env_size)_")


def _task_with_every_stage():
    return next(t for t in load_suite("researchenvbench")
                if all(s.applicable for s in (t.stages.cpu, t.stages.cuda, t.stages.single_gpu, t.stages.multi_gpu)))


def _every_verdict(task):
    """A verdict of every stage on every kind of record: measured, witnessed, and not measured."""
    context = GradeContext(gpus_assigned=2)
    command = CommandRecord(0, False, "final loss 0.0\n", witnessed=True, witness=None)
    yield from (grade_stage("c0", None, task, context), grade_stage("c1", command, task, context),
                grade_stage("c3", None, task, GradeContext(gpus_assigned=0)),  # too few GPUs: the hardware's
                grade_stage("c2", None, task, context), grade_stage("c3", command, task, context),
                grade_stage("c4", CommandRecord.of_launcher({"exit_code": 0, "port": 29500}, witnessed=True), task, context),
                grade_stage("c5", AuditRecord({"python_path": "/usr/bin/python3"}, None, {}), task, context),
                grade_stage("c5", AuditRecord({"gpu_count": 1}, probed=False), task, context),
                grade_stage("env_size", {"status": "not_run", "reason": "x"}, task, context),
                grade_stage("startup", StartupRecord(None, why_not="nothing probed"), task, context))
    yield from agent_failed(task, PROBE_STAGES, "missing_report", "no usable report")


def test_the_graders_trials_columns_are_exactly_the_schemas_stage_columns():
    task = _task_with_every_stage()
    verdicts = list(_every_verdict(task))
    written = {c for v in verdicts for c in v.trial_columns()}
    written |= set(settle_rows([StageRow(stage=v.stage, **v.stage_fields()) for v in verdicts]))
    assert written <= set(TRIALS_SCHEMA.names), sorted(written - set(TRIALS_SCHEMA.names))
    schema_family = {c for c in TRIALS_SCHEMA.names if _STAGE_FAMILY.match(c)}
    assert schema_family == {c for c in written if _STAGE_FAMILY.match(c)}
    assert STARTUP_COLUMNS | {"status", "failure_owner", "failure_category", "failure_reason",
                              "stages_missing_assets"} <= written


def test_a_stage_row_holds_exactly_the_stages_schema():
    task = _task_with_every_stage()
    spec = TrialSpec(sweep_id="s", agent="noop", task=task, trial_index=0, config=SweepConfig(wheelhouses=[]))
    rec = TrialRecorder(spec)
    for verdict in _every_verdict(task):
        rec.record(verdict, result=ExecResult(exit_code=0, duration_s=1.0, output="ok\n"), command="python x.py",
                   raw="{}", log_pattern="ok")
    rows = flatten(rec.result)[1]
    keys = set().union(*(s.keys() for s in rows))
    assert keys == set(STAGES_SCHEMA.names), (sorted(keys - set(STAGES_SCHEMA.names)),
                                              sorted(set(STAGES_SCHEMA.names) - keys))
    assert all(s["schema_version"] is None for s in rows)  # the sink writes its own version
    assert set(rec.row) <= set(TRIALS_SCHEMA.names)
