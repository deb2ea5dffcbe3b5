"""analysis.load on real Parquet runs, and the user guide's pandas / polars / duckdb examples."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from analysis.load import load_stages, load_trials
from reb_ray.errors import RebRayError

from .runs import write_run
from reb_ray.testing.synthetic import trial, write, write_fixture

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def fixture_run(tmp_path_factory) -> Path:
    return write_fixture(tmp_path_factory.mktemp("fixture") / "run")


def test_current_scored_attempts_by_default(tmp_path):
    # runs.ROWS: alpha t1 (infra, then scored a2), t2, t3 (scored, rerun scored a2, infra a3),
    # t4 (interrupted only); beta t1 (two infra attempts).
    run = write_run(tmp_path / "run")
    scored = load_trials(run)
    assert sorted(zip(scored["trial_id"].to_pylist(), scored["attempt"].to_pylist())) == [
        ("alpha/t1/0", 2), ("alpha/t2/0", 1), ("alpha/t3/0", 2)]
    current = load_trials(run, scored_only=False)
    assert sorted(zip(current["trial_id"].to_pylist(), current["status"].to_pylist())) == [
        ("alpha/t1/0", "scored"), ("alpha/t2/0", "scored"), ("alpha/t3/0", "scored"),
        ("alpha/t4/0", "interrupted"), ("beta/t1/0", "infra_error")]
    assert load_trials(run, all_attempts=True).num_rows == 9  # every row of runs.ROWS
    assert load_trials(run, sweep_id="nope").num_rows == 0


def test_frames_hold_the_same_rows(fixture_run):
    arrow = load_trials(fixture_run)
    pandas = load_trials(fixture_run, to="pandas")
    polars = load_trials(fixture_run, to="polars")
    assert arrow.num_rows == len(pandas) == polars.height == 36  # 3 agents x 6 tasks x 2 trials
    assert type(pandas).__module__.startswith("pandas") and type(polars).__module__.startswith("polars")
    assert sorted(pandas.trial_id) == sorted(polars["trial_id"].to_list()) == sorted(arrow["trial_id"].to_pylist())
    # weak t1/0 scored on its second attempt, after an infra error
    assert pandas.loc[pandas.trial_id == "weak/t1/0", "attempt"].tolist() == [2]
    # unknown stays null in every frame (weak uses no LLM)
    assert pandas.loc[pandas.agent == "weak", "cost_usd"].isna().all()
    assert polars.filter(polars["agent"] == "weak")["input_tokens"].null_count() == 12


def test_stages_follow_the_current_attempt(tmp_path):
    run = write(tmp_path / "run", [trial("a", "t1", 0, "FFFF", attempt=1), trial("a", "t1", 0, "SSSS", attempt=2),
                                   trial("a", "t2", 0, "SFFF", attempt=1)])
    c1 = load_stages(run, stage="c1").to_pylist()
    assert sorted((r["trial_id"], r["attempt"], r["status"]) for r in c1) == [
        ("a/t1/0", 2, "success"), ("a/t2/0", 1, "success")]
    every = load_stages(run, stage="c1", all_attempts=True)
    assert every.num_rows == 3
    assert load_stages(run, to="pandas").shape[0] == 2 * 8  # c0..c5, env_size, agent per attempt
    few = load_stages(run, stage="c1", columns=["status", "trial_id"])
    assert few.column_names == ["status", "trial_id"] and sorted(few["status"].to_pylist()) == ["success", "success"]
    with pytest.raises(RebRayError, match="'bogus' is not a stages column"):
        load_stages(run, columns=["bogus"])


def test_bad_input_is_one_line(tmp_path, fixture_run):
    with pytest.raises(RebRayError, match=r"no trials/ dataset here"):
        load_trials(tmp_path / "missing")
    with pytest.raises(RebRayError, match=r"to='excel': expected one of arrow, pandas, polars"):
        load_trials(fixture_run, to="excel")
    with pytest.raises(RebRayError, match=r"to='excel'"):
        load_stages(fixture_run, to="excel")


def _guide_examples() -> list[str]:
    guide = (ROOT / "docs/guide/results.md").read_text()
    section = guide.split("\n## Analysis in Python\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_guide_examples_run(fixture_run):
    blocks = _guide_examples()
    assert len(blocks) == 4
    assert 'run_dir = "reb-runs"' in blocks[0]
    namespace: dict = {}
    for block in blocks:
        exec(compile(block.replace('run_dir = "reb-runs"', f"run_dir = {str(fixture_run)!r}"), "docs/guide/results.md", "exec"),
             namespace)
    assert namespace["trials"].num_rows == 36 and namespace["c5"].num_rows == 36
    # By hand from reb_ray/testing/synthetic.py: C1 applies to t1-t4; frugal's C1 letters are
    # S S F F (trial 0) and S F F F (trial 1): 3 of 8; spender the same; weak none.
    assert namespace["c1_rate"].to_dict() == {"frugal": 0.375, "spender": 0.375, "weak": 0.0}
    spend = {r["agent"]: r for r in namespace["spend"].to_dicts()}
    assert (spend["frugal"]["input_tokens"], spend["frugal"]["output_tokens"]) == (12 * 4000, 12 * 1000)
    assert spend["spender"]["cost_usd"] == pytest.approx(12 * 0.40) and spend["frugal"]["priced_trials"] == 12
    assert spend["weak"]["priced_trials"] == 0  # its cost column is all null
    per_task = {(a, t): (n, s) for a, t, n, s in namespace["per_task"]}
    assert len(per_task) == 3 * 5  # C3 applies to t1-t5
    assert per_task[("frugal", "t1")] == (2, 1.0) and per_task[("frugal", "t2")] == (2, 0.5)
    assert per_task[("weak", "t4")] == (2, 0.0)  # one not_run (missing asset), one failure
