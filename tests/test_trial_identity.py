"""Resume by trial identity: real local Ray sweeps of built-in agents on the bundled demo suite
(local sandbox, so a trial takes seconds), and the identity digest's own rules."""

from __future__ import annotations

import shutil

import pyarrow.compute as pc
import pytest
from typer.testing import CliRunner

from reb_ray.cli import app

from reb_ray.models.sweep import SweepConfig, TrialSpec
from reb_ray.suite.load import load_suite, select_tasks
from reb_ray.results.read import read_stages, read_trials
from reb_ray.sweep.identity import scoring_identity
from reb_ray.sweep.trial_identity import trial_identities

FOUR = {"a": {"kind": "noop", "model": "m-a"}, "b": {"kind": "noop", "model": "m-b"},
        "c": {"kind": "noop", "model": "m-c"}, "d": {"kind": "noop", "model": "m-d"}}


def _config(output, agent_specs=FOUR, **fields) -> SweepConfig:
    base = dict(output=output, sandbox="local", wheelhouses=[], pip_cache=False, agent_specs=agent_specs,
                agents=list(agent_specs), tasks="numpy-trainer")
    return SweepConfig(**{**base, **fields})


def _with(agent: str, **changes) -> dict:
    return {**FOUR, agent: {**FOUR[agent], **changes}}


def _identities(config: SweepConfig, trial_index: int = 0) -> dict[str, str]:
    tasks = select_tasks(load_suite(config.suite, config.tasks_root), config.tasks)
    specs = [TrialSpec(sweep_id="x", agent=agent, task=task, trial_index=trial_index, config=config)
             for agent in config.agents for task in tasks]
    return trial_identities(specs, scoring_identity(config, None, tasks))


def test_the_identity_counts_what_decides_the_score_and_nothing_volatile(tmp_path):
    base = _identities(_config(tmp_path))
    assert len(set(base.values())) == 4  # four models, four identities
    volatile = _identities(_config(tmp_path / "moved", address="10.0.0.9:6379", max_concurrent=7, sweep_id="other",
                                   agent_specs=_with("a", base_url="http://127.0.0.1:4999/v1"), max_attempts=5))
    assert volatile == base
    renamed = _identities(_config(tmp_path, agent_specs={"zz" if k == "a" else k: v for k, v in FOUR.items()}))
    assert renamed["zz/numpy-trainer/0"] == base["a/numpy-trainer/0"]  # a table's name decides nothing
    model = _identities(_config(tmp_path, agent_specs=_with("d", model="m-e")))
    assert [k for k in base if base[k] != model[k]] == ["d/numpy-trainer/0"]
    args = _identities(_config(tmp_path, agent_specs=_with("b", extra_args=["--fast"])))
    assert [k for k in base if base[k] != args[k]] == ["b/numpy-trainer/0"]
    assert set(_identities(_config(tmp_path, agent_timeout_s=99)).values()).isdisjoint(base.values())
    assert set(_identities(_config(tmp_path), trial_index=1).values()).isdisjoint(base.values())


@pytest.fixture(scope="module")
def four(tmp_path_factory, ray_local):
    """The first sweep of the FOUR agents that the tests below start from, run once: (its
    output, what run_sweep returned). Each test works on its own copy of the output."""
    from reb_ray.sweep import run_sweep

    out = tmp_path_factory.mktemp("four") / "out"
    return out, run_sweep(_config(out), show_progress=False)


def test_a_changed_agent_reruns_only_its_trials_and_fresh_reruns_all(tmp_path, four, ray_local):
    from reb_ray.sweep import run_sweep

    out = tmp_path / "out"
    shutil.copytree(four[0], out)
    first = four[1]
    assert (first.attempts, first.scored, first.reused) == (4, 4, 0)
    # d's model changes: the derived sweep id changes with it; a, b and c are what they were.
    second = run_sweep(_config(out, agent_specs=_with("d", model="m-e")), show_progress=False)
    assert second.sweep_id != first.sweep_id
    assert (second.attempts, second.reused, second.reused_from) == (1, 3, {first.sweep_id: 3})
    rows = {r["trial_id"]: r for r in read_trials(out, second.sweep_id).to_pylist()}
    assert sorted(rows) == [f"{a}/numpy-trainer/0" for a in "abcd"]  # the sweep is whole under its own id
    assert {t: r["reused_from"] for t, r in rows.items()} == {"a/numpy-trainer/0": first.sweep_id,
                                                              "b/numpy-trainer/0": first.sweep_id,
                                                              "c/numpy-trainer/0": first.sweep_id,
                                                              "d/numpy-trainer/0": None}
    assert rows["d/numpy-trainer/0"]["agent_model"] == "m-e" and all(r["status"] == "scored" for r in rows.values())
    originals = {r["trial_id"]: r for r in read_trials(out, first.sweep_id).to_pylist()}
    for trial in ("a/numpy-trainer/0", "b/numpy-trainer/0", "c/numpy-trainer/0"):
        assert rows[trial]["trial_identity"] == originals[trial]["trial_identity"] is not None
        assert rows[trial]["c0_missing"] == originals[trial]["c0_missing"]
    assert rows["d/numpy-trainer/0"]["trial_identity"] != originals["d/numpy-trainer/0"]["trial_identity"]
    stages = read_stages(out, second.sweep_id)
    copied = stages.filter(pc.equal(stages["trial_id"], "a/numpy-trainer/0"))
    original = read_stages(out, first.sweep_id)
    assert copied.num_rows == original.filter(pc.equal(original["trial_id"], "a/numpy-trainer/0")).num_rows > 0
    # The same again resumes its own sweep; --fresh under yet another model runs all four.
    again = run_sweep(_config(out, agent_specs=_with("d", model="m-e")), show_progress=False)
    assert (again.attempts, again.skipped, again.reused) == (0, 4, 0)
    fresh = run_sweep(_config(out, agent_specs=_with("d", model="m-f"), fresh=True), show_progress=False)
    assert (fresh.attempts, fresh.scored, fresh.reused) == (4, 4, 0)
    assert read_trials(out, fresh.sweep_id)["reused_from"].null_count == 4


def test_a_moved_output_and_another_ray_address_run_nothing(tmp_path, four, ray_local):
    import ray

    from reb_ray.sweep import run_sweep

    shutil.copytree(four[0], tmp_path / "a")
    first = four[1]
    assert first.attempts == 4
    moved = tmp_path / "b"
    shutil.move(tmp_path / "a", moved)
    address = ray.get_runtime_context().gcs_address  # the same cluster, named by an address this time
    same = run_sweep(_config(moved, address=address), show_progress=False)
    assert (same.sweep_id, same.attempts, same.skipped) == (first.sweep_id, 0, 4)
    # Another sweep id, a renamed agent table and another endpoint port: still the same trials.
    # Through the command line, as a user runs it: the summary says what was reused and from where.
    config = tmp_path / "sweep.toml"
    config.write_text('wheelhouses = []\n[agents.a2]\nkind = "noop"\nmodel = "m-a"\nbase_url = "http://127.0.0.1:4999/v1"\n'
                      '[agents.b]\nkind = "noop"\nmodel = "m-b"\n')
    done = CliRunner().invoke(app, ["sweep", "--config", str(config), "--output", str(moved), "--address", address,
                                    "--sweep-id", "elsewhere", "--sandbox", "local", "--tasks", "numpy-trainer",
                                    "--no-pip-cache", "--quiet"])
    assert done.exit_code == 0, done.output
    assert "elsewhere: 0 attempt(s) run" in done.output
    assert f"reused 2 scored trial(s) of the same identity from sweep(s) {first.sweep_id} (2)" in done.output
    assert sorted(read_trials(moved, "elsewhere")["trial_id"].to_pylist()) == ["a2/numpy-trainer/0", "b/numpy-trainer/0"]
