"""Resume identity and drift (issue 13 item 7, field case F18), on real sweeps (local sandbox)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from reb_ray.errors import RebRayError
from reb_ray.models.sweep import SweepConfig
from reb_ray.results.read import read_trials
from reb_ray.sweep.identity import identity_path

AGENT = {"kind": "noop", "model": "m-1"}


def _config(output, **fields) -> SweepConfig:
    base = dict(sweep_id="ident", output=output, sandbox="local", wheelhouses=[], pip_cache=False,
                agent_specs={"coder": AGENT}, agents=["coder"], tasks="numpy-trainer")
    return SweepConfig(**{**base, **fields})


@pytest.fixture(scope="module")
def first_run(tmp_path_factory, ray_local) -> Path:
    """The first run of `_config` that the tests below start from, run once: each test works on
    its own copy (`_copy`)."""
    from reb_ray.sweep.run import run_sweep

    output = tmp_path_factory.mktemp("ident-first") / "out"
    assert run_sweep(_config(output), show_progress=False).attempts == 1
    return output


def _copy(first_run: Path, to: Path) -> Path:
    shutil.copytree(first_run, to)
    return to


def test_volatile_fields_rerun_nothing_and_scoring_fields_refuse_in_one_line(tmp_path, first_run, ray_local):
    from reb_ray.sweep.run import run_sweep

    first = _copy(first_run, tmp_path / "a")
    # F18: a moved output directory, another endpoint port, another Ray concurrency: nothing runs again.
    moved = tmp_path / "b"
    shutil.move(first, moved)
    again = run_sweep(_config(moved, max_concurrent=3, agent_specs={"coder": {**AGENT, "base_url": "http://127.0.0.1:4999/v1"}}),
                      show_progress=False)
    assert (again.attempts, again.skipped) == (0, 1)
    # The agent's model counts: refused, naming it, and nothing recorded is lost.
    with pytest.raises(RebRayError) as err:
        run_sweep(_config(moved, agent_specs={"coder": {**AGENT, "model": "m-2"}}), show_progress=False)
    message = str(err.value)
    assert "agent.coder.model" in message and '"m-1" -> "m-2"' in message and "\n" not in message
    with pytest.raises(RebRayError, match="agent_timeout_s"):
        run_sweep(_config(moved, agent_timeout_s=99), show_progress=False)
    assert len(read_trials(moved, "ident")) == 1


def test_a_new_task_adds_trials_and_allowed_drift_is_recorded(tmp_path, first_run, ray_local):
    from reb_ray.sweep.run import run_sweep

    out = _copy(first_run, tmp_path / "out")
    grown = run_sweep(_config(out, tasks="numpy-trainer,torch-tiny"), show_progress=False)
    assert (grown.attempts, grown.skipped) == (1, 1)  # the new task's trial only
    drifted = run_sweep(_config(out, tasks="numpy-trainer,torch-tiny", agent_timeout_s=99, allow_drift=True,
                                rerun=True), show_progress=False)
    assert drifted.attempts == 2
    rows = read_trials(out, "ident").to_pylist()
    assert sorted(r["config_drift"] == ["agent_timeout_s"] for r in rows) == [False, False, True, True]
    record = json.loads(identity_path(out, "ident").read_text())
    assert record["identity"]["agent_timeout_s"] == 1800.0  # the first run stays the reference
    assert record["history"][-1]["allowed_drift"] == ["agent_timeout_s"]


def test_a_sweep_with_nothing_scored_takes_the_new_settings(tmp_path, ray_local):
    """Every attempt an infra row (here: a missing asset, whose fix is a changed setting): there
    is nothing to be consistent with, so the changed setting is not drift."""
    from reb_ray.sweep.run import run_sweep

    tasks_root = tmp_path / "tasks"
    shutil.copytree(Path(__file__).resolve().parents[1] / "tasks" / "demo", tasks_root / "demo")
    spec = tasks_root / "demo" / "numpy-trainer" / "task.toml"
    spec.write_text(spec.read_text() + '\n[[assets]]\nname = "weights"\nkind = "model"\npath = "numpy-trainer/weights"\nsource = "hf://x/y"\n')
    first = run_sweep(_config(tmp_path / "out", tasks_root=tasks_root), show_progress=False)
    assert first.scored == 0 and first.infra_errors >= 1
    second = run_sweep(_config(tmp_path / "out", tasks_root=tasks_root, skip_missing_assets=True), show_progress=False)
    assert second.scored == 1
    with pytest.raises(RebRayError, match="skip_missing_assets"):  # now it has scored rows: drift counts
        run_sweep(_config(tmp_path / "out", tasks_root=tasks_root), show_progress=False)
