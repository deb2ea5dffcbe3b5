"""Comparing two runs' rows (reb_ray.results.compare, scripts/compare_runs.py): two real demo
sweeps agree on every deterministic column, and a value changed in a stored Parquet file, a
row on one side only, or a column changed in a path are each reported; excluded columns never are."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from reb_ray.errors import RebRayError
from reb_ray.results.compare import EXCLUDED, compare_runs, compared_columns
from reb_ray.results.schema import STAGES_SCHEMA, TRIALS_SCHEMA
from reb_ray.testing import synthetic

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "compare_runs.py"


def _run(output: Path, sweep: str, attempt: int = 1, before: tuple = (), **changes) -> Path:
    """A small synthetic run: two trials (`before`: attempts written first); `changes` update the
    first trial's row."""
    first = synthetic.trial("a", "t1", 0, "SF--", sweep=sweep, attempt=attempt)
    first[0].update(changes, agent_log_path=f"artifacts/sweep_id={sweep}/a/t1/0/agent.log.gz")
    second = synthetic.trial("a", "t2", 0, "FF--", sweep=sweep, c0_missing=3, attempt=attempt)
    return synthetic.write(output, [*before, first, second])


def _change_stored_value(output: Path, trial_id: str, column: str, value) -> None:
    """Rewrite the trials part file holding `trial_id`, with `column` set to `value` there."""
    for part in output.glob("trials/**/*.parquet"):
        table = pq.read_table(part, schema=TRIALS_SCHEMA)
        rows = table.to_pylist()
        hits = [r for r in rows if r["trial_id"] == trial_id]
        if hits:
            for row in hits:
                row[column] = value
            pq.write_table(table.from_pylist(rows, schema=table.schema), part)
            return
    raise AssertionError(f"no trials part holds {trial_id}")


def test_every_schema_column_is_compared_or_excluded_with_a_reason():
    for dataset, schema in (("trials", TRIALS_SCHEMA), ("stages", STAGES_SCHEMA)):
        assert set(EXCLUDED[dataset]) <= set(schema.names), dataset
        assert all(len(why) > 20 for why in EXCLUDED[dataset].values())
        compared = compared_columns(dataset)
        assert set(compared) | set(EXCLUDED[dataset]) | {"trial_id", "attempt", "stage"} >= set(schema.names)
        assert "status" in compared and "failure_category" in compared
    assert {"c0_missing", "c1_status", "failure_owner", "trial_identity", "agent_log_path"} <= set(compared_columns("trials"))


def test_equal_runs_under_different_sweep_ids_and_timings_agree(tmp_path):
    a = _run(tmp_path / "a", "sweep-one")
    b = _run(tmp_path / "b", "sweep-two", agent_wall_time_s=7.0, node="elsewhere", c4_port=29501)
    assert compare_runs(a, b) == []


def test_a_changed_value_a_changed_path_and_a_missing_row_are_each_reported(tmp_path):
    a = _run(tmp_path / "a", "sweep-one")
    b = _run(tmp_path / "b", "sweep-two", c0_missing=4, c5_path=1)
    synthetic.write(b, [synthetic.trial("a", "t3", 0, "SS--", sweep="sweep-two")])
    _change_stored_value(b, "a/t2/0", "agent_log_path", "logs/elsewhere.gz")
    lines = [d.line() for d in compare_runs(a, b)]
    assert "trials a/t1/0 1 c0_missing: A=0 B=4" in lines
    assert "trials a/t1/0 1 c5_path: A=0 B=1" in lines
    assert "trials a/t2/0 1 agent_log_path: A=None B='logs/elsewhere.gz'" in lines
    assert "trials a/t3/0 1: absent in A, present in B" in lines
    assert sum(line.startswith("stages a/t3/0 1 ") for line in lines) == 8  # c0, c1..c4, c5, env_size, agent
    assert len(lines) == 4 + 8


def test_latest_only_ignores_an_infra_retry_on_one_side(tmp_path):
    a = _run(tmp_path / "a", "s1")
    b = _run(tmp_path / "b", "s2", attempt=2, before=[synthetic.trial("a", "t1", 0, "SF--", status="infra_error", sweep="s2")])
    lines = [d.line() for d in compare_runs(a, b)]
    assert "trials a/t2/0 1: present in A, absent in B" in lines and "trials a/t2/0 2: absent in A, present in B" in lines
    assert compare_runs(a, b, latest_only=True) == []  # each trial's current attempt, whatever its number
    _change_stored_value(b, "a/t1/0", "c1_status", "failure")
    assert [d.line() for d in compare_runs(a, b, latest_only=True)] == ["trials a/t1/0 c1_status: A='success' B='failure'"]


def test_bad_input_is_one_line(tmp_path):
    a = _run(tmp_path / "a", "s1")
    with pytest.raises(RebRayError, match="no trials rows"):
        compare_runs(a, tmp_path / "nothing")
    synthetic.write(a, [synthetic.trial("a", "t9", 0, "SS--", sweep="s9")])
    with pytest.raises(RebRayError, match="2 sweeps \\(s1, s9\\); name one"):
        compare_runs(a, a)
    assert compare_runs(a, a, "s1", "s1") == []
    with pytest.raises(RebRayError, match="unknown column"):
        compare_runs(a, a, "s1", "s1", ignore=("no_such",))


# -- two real demo sweeps (local sandbox, noop agent, real pyright and probes, real Ray) --------


TWO_TASKS = ("numpy-trainer", "torch-tiny")


@pytest.fixture(scope="module")
def two_demo_runs(tmp_path_factory, ray_local):
    from reb_ray.models.sweep import SweepConfig
    from reb_ray.sweep.run import run_sweep

    outputs = []
    for name in ("a", "b"):
        output = tmp_path_factory.mktemp("compare") / name
        # Two of the four demo tasks: numpy-trainer (whose stored value is changed below) and
        # torch-tiny, the one whose C2 runs (noop: no_framework); the other two take numpy-trainer's
        # paths through the stages
        config = SweepConfig(output=output, agents=["noop"], sandbox="local", max_concurrent=2, wheelhouses=[],
                             tasks=",".join(TWO_TASKS), sweep_id=f"compare-{name}-{tmp_path_factory.getbasetemp().name}")
        result = run_sweep(config, show_progress=False)
        assert result.attempts == 2
        outputs.append(output)
    return outputs


def _script(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=300)


def test_two_demo_sweeps_agree_and_a_changed_stored_value_is_reported(two_demo_runs, tmp_path):
    a, b = two_demo_runs
    done = _script(a, b)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "A: 2 trials rows" in done.stdout and ": 0 difference(s)" in done.stdout
    changed = tmp_path / "changed"
    shutil.copytree(b, changed)
    _change_stored_value(changed, "noop/numpy-trainer/0", "c0_missing", 7)
    done = _script(a, changed)
    assert done.returncode == 1
    assert done.stdout.splitlines()[0] == "trials noop/numpy-trainer/0 1 c0_missing: A=1 B=7"
    assert ": 1 difference(s)" in done.stdout
