"""The reference recipe in the trial identity: a `reference` trial is another trial when the
recipe it replays changed, and no other agent's identity sees the recipe at all."""

from __future__ import annotations

import shutil
from pathlib import Path

from reb_ray.agents.reference import recipe_digest, replayed_files
from reb_ray.models.sweep import SweepConfig, TrialSpec
from reb_ray.results.read import read_trials
from reb_ray.suite.load import load_suite, select_tasks
from reb_ray.sweep.identity import scoring_identity
from reb_ray.sweep.trial_identity import trial_identities

DEMO = Path(__file__).resolve().parents[2] / "tasks" / "demo"
TASK = "numpy-trainer"


def _suite(tmp_path: Path) -> Path:
    """A copy of the demo suite (its shipped references included) to change recipes in."""
    root = tmp_path / "tasks"
    shutil.copytree(DEMO, root / "demo")
    return root


def _config(root: Path, agents: list[str], **fields) -> SweepConfig:
    base = dict(output=root.parent / "out", sandbox="local", wheelhouses=[], pip_cache=False, agents=agents,
                tasks=TASK, tasks_root=root)
    return SweepConfig(**{**base, **fields})


def _identities(config: SweepConfig) -> dict[str, str]:
    tasks = select_tasks(load_suite(config.suite, config.tasks_root), config.tasks)
    specs = [TrialSpec(sweep_id="x", agent=agent, task=task, trial_index=0, config=config)
             for agent in config.agents for task in tasks]
    return trial_identities(specs, scoring_identity(config, None, tasks))


def test_the_digest_covers_what_the_replay_reads_and_nothing_else(tmp_path):
    root = _suite(tmp_path)
    where = root / "demo" / TASK / "reference"
    task = select_tasks(load_suite("demo", root), TASK)[0]
    names = [p.relative_to(where).as_posix() for p in replayed_files(where)]
    # The Dockerfile, what its COPY steps take from the directory, the report; never the notes.
    assert names == ["Dockerfile", "report.json", "requirements.lock", "requirements.nohash.lock"]
    first = recipe_digest(task)
    assert len(first) == 16 and first == recipe_digest(task)
    (where / "README.md").write_text("reworded\n")
    (where / "reference.toml").write_text((where / "reference.toml").read_text() + "# a note\n")
    assert recipe_digest(task) == first  # descriptions of the recipe are not the recipe
    lock = where / "requirements.lock"
    lock.write_text(lock.read_text() + "\n")
    assert recipe_digest(task) not in (None, first)
    shutil.rmtree(where)
    assert recipe_digest(task) is None


def test_only_the_reference_agents_identity_names_the_recipe(tmp_path):
    root = _suite(tmp_path)
    others = _identities(_config(root, ["heuristic", "noop"]))
    both = _identities(_config(root, ["heuristic", "noop", "reference"]))
    # Other agents' identities are byte-identical whether a reference agent is in the sweep or not.
    assert {t: both[t] for t in others} == others
    # ... and the sweep's scoring identity gains keys only with a reference agent in it.
    tasks = select_tasks(load_suite("demo", root), TASK)
    plain = scoring_identity(_config(root, ["heuristic", "noop"]), None, tasks)
    assert not [k for k in plain if k.startswith("reference.")]
    assert scoring_identity(_config(root, ["noop", "reference"]), None, tasks)[f"reference.{TASK}"] == \
        recipe_digest(tasks[0])
    dockerfile = root / "demo" / TASK / "reference" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text().replace("--require-hashes", "--require-hashes --no-compile"))
    changed = _identities(_config(root, ["heuristic", "noop", "reference"]))
    assert [t for t in both if both[t] != changed[t]] == [f"reference/{TASK}/0"]


def test_a_changed_dockerfile_runs_the_reference_trial_again(tmp_path, ray_local):
    """Real local sweeps under other sweep ids into one output: an unchanged recipe reuses the
    scored reference trial; a changed Dockerfile runs it again while noop is still reused."""
    from reb_ray.sweep import run_sweep

    root = _suite(tmp_path)
    out = tmp_path / "out"
    first = run_sweep(_config(root, ["reference", "noop"], output=out, sweep_id="first"), show_progress=False)
    assert (first.attempts, first.scored) == (2, 2)
    same = run_sweep(_config(root, ["reference", "noop"], output=out, sweep_id="same"), show_progress=False)
    assert (same.attempts, same.reused) == (0, 2)
    dockerfile = root / "demo" / TASK / "reference" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "RUN true\n")
    changed = run_sweep(_config(root, ["reference", "noop"], output=out, sweep_id="changed"), show_progress=False)
    assert (changed.attempts, changed.reused, changed.reused_from) == (1, 1, {"first": 1})
    rows = {r["agent"]: r for r in read_trials(out, "changed").to_pylist()}
    assert rows["reference"]["reused_from"] is None and rows["noop"]["reused_from"] == "first"
    before = {r["agent"]: r for r in read_trials(out, "first").to_pylist()}
    assert rows["reference"]["trial_identity"] != before["reference"]["trial_identity"]
    assert rows["noop"]["trial_identity"] == before["noop"]["trial_identity"]
