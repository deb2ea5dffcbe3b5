"""`repo_modified` against the state before the agent phase (issue 9, item 16), in real sandboxes
with real git: files already missing or different when the agent starts are not charged to it."""

from __future__ import annotations

import subprocess
from pathlib import Path

from reb_ray.models.sweep import SweepConfig, TrialSpec
from reb_ray.suite.load import load_suite
from reb_ray.trial.repo_state import changed_since, tracked_state
from reb_ray.trial.between_phases import record_changes
from reb_ray.trial.record import TrialRecorder
from tests.helpers.git import GIT_ENV

_ENV = GIT_ENV


def _repo_with_gaps(tmp_path: Path) -> Path:
    """A committed repository whose checkout lacks b.py and has c.py changed, as an incomplete
    mirror or a line-ending rule leaves it before the agent ever runs."""
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True, env=_ENV)
    for name in ("a.py", "b.py", "c.py", "d.py", "with space.py"):
        (repo / name).write_text(f"# {name}\n")
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True, env=_ENV)
    subprocess.run(["git", "commit", "-qm", "one"], cwd=repo, check=True, env=_ENV)
    (repo / "b.py").unlink()
    (repo / "c.py").write_text("# c.py\r\n")
    return repo


def _recorder() -> TrialRecorder:
    task = load_suite("demo")[0]
    return TrialRecorder(TrialSpec(sweep_id="s", agent="noop", task=task, trial_index=0, config=SweepConfig(wheelhouses=[])))


def test_an_idle_agent_is_not_charged_for_a_checkout_that_was_already_incomplete(make_sandbox, tmp_path):
    sb = make_sandbox()
    repo_dir = f"{sb.workdir}/repo"
    sb.put(_repo_with_gaps(tmp_path), repo_dir)
    baseline = tracked_state(sb, repo_dir)
    assert set(baseline) == {"b.py", "c.py"} and baseline["b.py"] == "missing" and len(baseline["c.py"]) == 40
    rec = _recorder()
    record_changes(rec, baseline, tracked_state(sb, repo_dir))  # the agent did nothing (noop)
    assert (rec.row["repo_modified"], rec.row["repo_modified_files"]) == (False, [])


def test_what_the_agent_changed_is_charged_and_only_that(make_sandbox, tmp_path):
    sb = make_sandbox()
    repo_dir = f"{sb.workdir}/repo"
    sb.put(_repo_with_gaps(tmp_path), repo_dir)
    baseline = tracked_state(sb, repo_dir)
    # The agent edits a clean file, edits an already-changed one again, deletes one, leaves b.py missing.
    assert sb.exec(["sh", "-c", "echo x >> a.py && echo y >> c.py && rm d.py && echo z >> 'with space.py'"],
                   workdir=repo_dir).ok
    rec = _recorder()
    record_changes(rec, baseline, tracked_state(sb, repo_dir))
    assert rec.row["repo_modified"] is True
    assert rec.row["repo_modified_files"] == ["a.py", "c.py", "d.py", "with space.py"]
    assert sb.exec(["ls", f"{repo_dir}.reb-ray-state"]).exit_code != 0  # the listing is not left behind


def test_unknown_state_stays_null(make_sandbox):
    sb = make_sandbox()
    assert tracked_state(sb, f"{sb.workdir}/not-a-repo") is None
    rec = _recorder()
    record_changes(rec, {}, tracked_state(sb, f"{sb.workdir}/not-a-repo"))
    assert rec.row["repo_modified"] is None and rec.row["repo_modified_files"] is None  # null, never False


def test_changed_since_is_the_symmetric_difference_of_states():
    before = {"b.py": "missing", "c.py": "1" * 40}
    assert changed_since(before, dict(before)) == []
    assert changed_since(before, {"b.py": "missing"}) == ["c.py"]  # the agent put c.py back: a change it made
    assert changed_since({}, {"a.py": "2" * 40}) == ["a.py"]
