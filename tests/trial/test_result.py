"""The attempt's typed result and its one flattening to rows (reb_ray.trial.result).

For a fully-populated result `flatten` makes every TRIALS_SCHEMA column but the driver-owned
ones, and no other; each part's columns are its own (no column filled by two parts); the row
converts to the schema's Arrow types; an empty result flattens to nulls (unknown, never 0);
and no module of the trial path writes a trials-row key by itself any more.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from pathlib import Path

import pyarrow as pa
import pytest

from reb_ray.grading.stage import AuditRecord, CommandRecord, GradeContext, StartupRecord, grade_stage
from reb_ray.grading.unmeasured import PROBE_STAGES, agent_failed
from reb_ray.models.sweep import SweepConfig, TrialSpec
from reb_ray.redact import Redactor
from reb_ray.results.rows import rows_to_table
from reb_ray.results.schema import STAGES_SCHEMA, TRIALS_SCHEMA
from reb_ray.sandbox import ExecResult
from reb_ray.suite.load import load_suite
from reb_ray.trial.record import TrialRecorder, settle_rows
from reb_ray.trial.result import DRIVER_COLUMNS, AttemptResult, StageRow, flatten

ROOT = Path(__file__).resolve().parents[2]


def _task():
    """A task every stage applies to, so each stage's verdict sets its measured columns."""
    return next(t for t in load_suite("researchenvbench")
                if all(s.applicable for s in (t.stages.cpu, t.stages.cuda, t.stages.single_gpu, t.stages.multi_gpu)))


def _sample(kind: pa.DataType):
    """A non-null value of Arrow type `kind`, distinct from a default (never 0, never empty)."""
    if pa.types.is_string(kind):
        return "x"
    if pa.types.is_boolean(kind):
        return True
    if pa.types.is_integer(kind):
        return 7
    if pa.types.is_floating(kind):
        return 1.5
    if pa.types.is_timestamp(kind):
        return dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
    if pa.types.is_list(kind) and pa.types.is_string(kind.value_type):
        return ["a", "b"]
    raise AssertionError(f"no sample for {kind}")


def _verdicts(task):
    """A verdict of every graded stage, measured, so each sets every column of its stage."""
    context = GradeContext(gpus_assigned=2)
    command = CommandRecord(0, False, "final loss 0.0\n", witnessed=True, witness=None)
    return [grade_stage("c0", None, task, context), grade_stage("c1", command, task, context),
            grade_stage("c2", None, task, context), grade_stage("c3", command, task, context),
            grade_stage("c4", CommandRecord.of_launcher({"exit_code": 0, "port": 29500}, witnessed=True), task, context),
            grade_stage("c5", AuditRecord({"python_path": "/usr/bin/python3"}, None, {}), task, context),
            grade_stage("env_size", {"status": "not_run", "reason": "x"}, task, context),
            grade_stage("startup", StartupRecord(None, why_not="nothing probed"), task, context)]


def _full_result() -> AttemptResult:
    """Every column field of every part set to a non-null value of its column's type, and a
    verdict of every stage."""
    result = AttemptResult()
    for part in result.parts():
        part.set(**{name: _sample(TRIALS_SCHEMA.field(name).type) for name in part.column_names()})
    result.agent.report_source = "forced_from_output"
    result.probe.verdicts.extend(_verdicts(_task()))
    return result


def test_flatten_makes_every_schema_column_but_the_drivers_and_no_other():
    row, stages = flatten(_full_result())
    schema = set(TRIALS_SCHEMA.names)
    assert set(DRIVER_COLUMNS) <= schema, sorted(set(DRIVER_COLUMNS) - schema)
    assert not set(row) & set(DRIVER_COLUMNS), sorted(set(row) & set(DRIVER_COLUMNS))
    assert set(row) | set(DRIVER_COLUMNS) == schema, (sorted(set(row) - schema),
                                                      sorted(schema - set(DRIVER_COLUMNS) - set(row)))
    assert stages == []
    table = rows_to_table([row], TRIALS_SCHEMA)  # every value converts to its column's type
    assert table.num_rows == 1 and table.column("agent_exit_code")[0].as_py() == 7


def test_each_column_belongs_to_one_part_and_every_part_value_reaches_the_row():
    result = _full_result()
    owners: dict[str, str] = {}
    for part in result.parts():
        for name in part.column_names():
            assert name not in owners, f"{name} is a column of {owners[name]} and of {type(part).__name__}"
            owners[name] = type(part).__name__
    row = result.trials_row()
    grades = result.probe.grade_columns()
    for name in set(owners) - set(grades):
        assert row[name] is not None, name


def test_the_stage_row_covers_the_stages_schema_exactly():
    """StageRow has a field per STAGES_SCHEMA column, in the schema's order, and no other; the
    stage rows `flatten` makes hold exactly those columns and convert to the schema's types."""
    assert [f.name for f in dataclasses.fields(StageRow)] == STAGES_SCHEMA.names
    row = StageRow(stage="c1", status="failure", failure_category="deps", sweep_id="s", trial_id="a/t/0", attempt=1)
    result = AttemptResult(stages=[row])
    stages = flatten(result)[1]
    assert list(stages[0]) == STAGES_SCHEMA.names
    assert (stages[0]["stage"], stages[0]["status"], stages[0]["failure_category"]) == ("c1", "failure", "deps")
    table = rows_to_table(stages, STAGES_SCHEMA)
    assert table.column("schema_version")[0].as_py() == 1  # the sink's own version, never a stored null
    stages[0]["reason"] = "changed"
    assert row.reason is None  # a new dict: the result is as it was


def test_a_stage_row_refuses_what_the_vocabulary_lacks():
    with pytest.raises(ValueError):
        StageRow(stage="c9", status="success")
    with pytest.raises(ValueError):
        StageRow(stage="c1", status="passed")
    with pytest.raises(ValueError, match="unknown failure category"):
        StageRow(stage="c1", status="failure", failure_category="depz")
    row = StageRow(stage="c1", status="success")
    with pytest.raises(KeyError, match="StageRow has no column 'witness'"):
        row.set(witness="valid")
    with pytest.raises(AttributeError):
        row.witness = "valid"  # type: ignore[attr-defined]


def test_an_empty_result_is_all_unknown_never_zero():
    row, _ = flatten(AttemptResult())
    assert row and all(value is None for value in row.values()), {k: v for k, v in row.items() if v is not None}


def test_report_source_is_the_between_phases_verdict_else_the_agents_own():
    result = AttemptResult()
    result.agent.report_source = "forced_from_output"
    assert flatten(result)[0]["report_source"] == "forced_from_output"  # the agent phase ended the attempt
    result.between.report_source = "agent_file"
    assert flatten(result)[0]["report_source"] == "agent_file"


def test_a_part_refuses_a_column_it_does_not_own():
    result = AttemptResult()
    with pytest.raises(KeyError, match="LlmUsage has no column 'agent_exit_code'"):
        result.llm.set(agent_exit_code=1)
    with pytest.raises(AttributeError):
        result.agent.agent_exit = 0  # type: ignore[attr-defined]


def test_the_recorders_row_is_flatten_and_read_only():
    spec = TrialSpec(sweep_id="s", agent="noop", task=_task(), trial_index=0, config=SweepConfig(wheelhouses=[]))
    rec = TrialRecorder(spec)
    with pytest.raises(TypeError):
        rec.row["status"] = "scored"  # type: ignore[index]
    for verdict in _verdicts(spec.task):
        rec.record(verdict, result=ExecResult(exit_code=0, duration_s=1.0, output="ok\n"))
    rec.result.between.report_status = "ok"
    rec.settle()
    outcome = rec.outcome(Redactor([]))
    assert outcome.trial == {**flatten(rec.result)[0], "finished_at": outcome.trial["finished_at"]}
    settled = settle_rows(rec.stages)  # C0 without a record: infra_toolbox, so infra_error
    assert outcome.trial["finished_at"] is not None and outcome.trial["status"] == settled["status"] == "infra_error"
    c1 = next(v for v in _verdicts(spec.task) if v.stage == "c1").trial_columns()
    assert {k: outcome.trial[k] for k in c1} == c1 and outcome.trial["sweep_id"] == "s"
    assert [s["stage"] for s in outcome.stages] == [str(v.stage) for v in _verdicts(spec.task)]
    assert outcome.stages == flatten(rec.result)[1]  # the stage rows are flatten's too
    assert all(type(s["stage"]) is str and type(s["status"]) is str for s in outcome.stages)  # never an enum
    rows_to_table([outcome.trial], TRIALS_SCHEMA)
    rows_to_table(outcome.stages, STAGES_SCHEMA)


def test_a_later_verdict_of_a_stage_wins():
    task = _task()
    result = AttemptResult()
    result.probe.verdicts.extend(agent_failed(task, PROBE_STAGES, "missing_report", "no usable report"))
    assert flatten(result)[0]["c1_failure_category"] == "missing_report"
    later = grade_stage("c1", CommandRecord(1, False, "Traceback\n", witnessed=True, witness=None), task,
                        GradeContext(gpus_assigned=0))
    result.probe.verdicts.append(later)
    assert later.trial_columns()["c1_failure_category"] not in (None, "missing_report")
    assert flatten(result)[0]["c1_failure_category"] == later.trial_columns()["c1_failure_category"]


#: Writing a row key: `x.row[...] =`, `x.row.update(`, `x.row = `, `row["..."] =` on a trials row.
_ROW_WRITE = re.compile(r"\.row\s*\[[^\]]*\]\s*=(?!=)|\.row\.(update|setdefault|pop)\(|\.row\s*=(?!=)")


@pytest.mark.parametrize("package", ["reb_ray/trial", "reb_ray/environment"])
def test_no_module_of_the_trial_path_writes_a_row_key(package):
    """Phases set their typed part; only reb_ray/trial/result.py makes the trials row."""
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
             for path in sorted((ROOT / package).rglob("*.py")) if path.name != "result.py" or package != "reb_ray/trial"
             for n, line in enumerate(path.read_text().splitlines(), 1) if _ROW_WRITE.search(line)]
    assert not found, found


def test_the_grep_finds_a_row_write():
    """The pattern above is not vacuous: each form of a write matches, a read does not."""
    for line in ('rec.row["x"] = 1', "self.rec.row.update(a=1)", "rec.row = {}", "rec.row.setdefault('a', 1)"):
        assert _ROW_WRITE.search(line), line
    for line in ('rec.row.get("x")', 'rec.row["x"] == 1', "keep.wanted(p, self.rec.row, s)"):
        assert not _ROW_WRITE.search(line), line


def test_parts_are_dataclasses_with_slots():
    """A misspelt attribute fails where it is set, not as a column nobody reads."""
    for part in AttemptResult().parts():
        assert dataclasses.is_dataclass(part) and not hasattr(part, "__dict__"), type(part).__name__


def test_the_helpers_that_answer_with_columns_answer_with_their_parts_columns():
    """What `TrialLlm.finish` (a metered LLM agent and a baseline that calls no model),
    `TrialEgress.close` and the node's `fingerprint` return fits the part the phase sets with
    it: `set` raises KeyError on a column the part lacks."""
    from types import SimpleNamespace

    from reb_ray.agents import get_agent
    from reb_ray.environment.fingerprint import fingerprint
    from reb_ray.trial.egress import TrialEgress
    from reb_ray.trial.llm import TrialLlm

    result = AttemptResult()
    meter = {"requests": 2, "input_tokens": 5, "output_tokens": 1, "cost_usd": 0.01, "cost_source": "price_table",
             "models": {"m": 2}, "failures": {}, "in_flight": 0}
    metered = TrialLlm._meter_columns(SimpleNamespace(log=[{"status": 200, "started_at": 1.0}]), meter, None)
    result.llm.set(**metered)
    assert result.llm.llm_requests == 2 and result.llm.llm_model == "m"
    spec = TrialSpec(sweep_id="s", agent="heuristic", task=_task(), trial_index=0, config=SweepConfig(wheelhouses=[]))
    baseline = TrialLlm(get_agent(spec.agent_spec), spec, None, "local").finish(None, None)
    result.llm.set(**baseline)
    assert result.llm.cost_source == "no_model" and result.llm.llm_requests == 0
    result.network.set(**TrialEgress(SweepConfig(wheelhouses=[], sandbox="local")).close(None))
    result.hardware.set(**fingerprint("local"))
    assert result.hardware.cpu_count is not None
