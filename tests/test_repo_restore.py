"""The repository as pinned before the probes (real git in real sandboxes): what the agent
changed is put back, committed edits included; pre-existing differences and untracked files stay."""

from __future__ import annotations

import subprocess
from pathlib import Path

from reb_ray.trial.repo_restore import restore_pinned, unchanged_by_agent
from reb_ray.trial.repo_state import tracked_state
from reb_ray.trial.between_phases import restore_repo
from tests.test_repo_state import _ENV, _recorder, _repo_with_gaps


def _head(repo: Path) -> str:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def _read(sb, path: str) -> str:
    return sb.exec(["cat", path]).output


def test_edits_deletions_and_a_directory_in_a_files_place_are_put_back(make_sandbox, tmp_path):
    sb = make_sandbox()
    host = _repo_with_gaps(tmp_path)
    pinned = _head(host)
    repo = f"{sb.workdir}/repo"
    sb.put(host, repo)
    before = tracked_state(sb, repo)
    assert sb.exec(["sh", "-c", "echo x >> a.py && rm 'with space.py' && rm d.py && mkdir d.py && touch d.py/f "
                                "&& echo built > out.so && echo y >> c.py"], workdir=repo).ok
    after = tracked_state(sb, repo)
    keep = unchanged_by_agent(before, after)
    assert keep == ["b.py"]  # missing before the agent, and still missing: not its change
    columns = restore_pinned(sb, repo, pinned, keep)
    assert columns == {"repo_head_moved": False, "repo_restored": True,
                       "repo_restored_files": ["a.py", "c.py", "d.py", "with space.py"]}
    assert _read(sb, f"{repo}/a.py") == "# a.py\n" and _read(sb, f"{repo}/d.py") == "# d.py\n"
    assert _read(sb, f"{repo}/c.py") == "# c.py\n"  # the agent changed it further: back to the pinned bytes
    assert _read(sb, f"{repo}/out.so") == "built\n"  # untracked build output stays
    assert sb.exec(["test", "-e", f"{repo}/b.py"]).exit_code != 0  # the pre-existing gap stays


def test_a_committed_edit_is_found_and_put_back(make_sandbox, tmp_path):
    sb = make_sandbox()
    host = _repo_with_gaps(tmp_path)
    pinned = _head(host)
    repo = f"{sb.workdir}/repo"
    sb.put(host, repo)
    env = {k: v for k, v in _ENV.items() if k != "PATH"}
    assert sb.exec(["sh", "-c", "echo 'print(1)' > a.py && git -c safe.directory='*' commit -qam edit"], workdir=repo, env=env).ok
    assert tracked_state(sb, repo) == {}  # `git status` sees nothing: the edit is committed
    columns = restore_pinned(sb, repo, pinned, [])
    assert columns["repo_head_moved"] is True and "a.py" in columns["repo_restored_files"]
    assert columns["repo_restored"] is True and _read(sb, f"{repo}/a.py") == "# a.py\n"


def test_a_removed_git_directory_is_restored_from_the_hosts_checkout(make_sandbox, tmp_path):
    sb = make_sandbox()
    host = _repo_with_gaps(tmp_path)
    subprocess.run(["git", "checkout", "-q", "--", "."], cwd=host, check=True, env=_ENV)  # a whole checkout
    repo = f"{sb.workdir}/repo"
    sb.put(host, repo)
    assert sb.exec(["sh", "-c", "rm -rf .git && echo 'print(1)' > a.py"], workdir=repo).ok
    rec = _recorder()
    rec.result.setup.repo_commit = _head(host)
    restore_repo(rec, sb, repo, {}, None, host)
    assert rec.row["repo_restored"] is True and rec.row["repo_restored_files"] is None  # what differed is unknown
    assert _read(sb, f"{repo}/a.py") == "# a.py\n"


def test_no_commit_known_is_null():
    assert restore_pinned(None, "/x", None, []) == {"repo_head_moved": None, "repo_restored": None,
                                                    "repo_restored_files": None}
