"""Repository placement with real git: bundled source, local mirrors, missing commits."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from reb_ray.errors import InfraError
from reb_ray.suite.load import load_suite, load_task
from reb_ray.suite.placement import find_mirror, place_repo
from reb_ray.testing.suite import write_task
from tests.helpers.git import git as _git, mirrored_repo

URL = "https://github.com/someone/tiny"


@pytest.fixture
def mirror(tmp_path) -> tuple[Path, str, str]:
    """A bare mirror at DIR/someone/tiny.git with two commits; returns (DIR, first, second)."""
    mirrors, (first, second) = mirrored_repo(tmp_path, {"main.py": "print(1)\n"}, {"main.py": "print(2)\n"})
    return mirrors, first, second


def _task(tmp_path: Path, commit: str, url: str = URL):
    task_dir = write_task(tmp_path / "suites", "mirrored", "tiny", category="1_cpu", cpu='command = "python main.py"',
                          git=(url, commit))
    return load_task(task_dir / "task.toml")


def test_mirror_checkout_is_at_the_pinned_commit(tmp_path, mirror):
    mirrors, first, _second = mirror
    placed = place_repo(_task(tmp_path, first), tmp_path / "ws", [mirrors])
    assert placed.commit == first and placed.origin.startswith("mirror:")
    assert (placed.path / "main.py").read_text() == "print(1)\n"


def test_fetch_tool_layout_is_found(tmp_path, mirror):
    mirrors, _first, _second = mirror
    nested = tmp_path / "fetched" / "someone+tiny"
    nested.mkdir(parents=True)
    (mirrors / "someone" / "tiny.git").rename(nested / "repo")
    assert find_mirror([tmp_path / "fetched"], "someone/tiny") == nested / "repo"


def test_missing_commit_in_mirror_is_an_infra_clone_error(tmp_path, mirror):
    mirrors, _first, _second = mirror
    with pytest.raises(InfraError) as err:
        place_repo(_task(tmp_path, "0" * 40), tmp_path / "ws", [mirrors])
    assert err.value.category == "infra_clone" and "0" * 40 in str(err.value)


def test_unreachable_url_is_an_infra_clone_error(tmp_path):
    # Port 9 on loopback refuses at once: a clone failure without leaving this machine.
    with pytest.raises(InfraError) as err:
        place_repo(_task(tmp_path, "1" * 40, url="https://127.0.0.1:9/someone/tiny"), tmp_path / "ws", [])
    assert err.value.category == "infra_clone"


def test_bundled_source_gives_the_same_commit_every_time(tmp_path):
    task = load_suite("demo")[0]
    a = place_repo(task, tmp_path / "a")
    b = place_repo(task, tmp_path / "b")
    assert a.commit == b.commit and len(a.commit) == 40 and a.origin == f"bundled:demo/{task.id}"


def test_bundled_source_is_committed_once_per_content_and_old_copies_are_pruned(tmp_path, monkeypatch):
    """Issue 12, item 2: trials reuse one committed copy; an edit gives a new one; unused ones go."""
    import os

    from reb_ray.suite.placement import BUNDLED_KEEP_S

    monkeypatch.setenv("REB_RAY_CACHE_DIR", str(tmp_path / "cache"))
    task_dir = write_task(tmp_path / "suites", "mine", "tiny-bundled", category="1_cpu", cpu='command = "python main.py"',
                          files={"main.py": "print(1)\n"})
    task = load_task(task_dir / "task.toml")
    first = place_repo(task, tmp_path / "a")
    again = place_repo(task, tmp_path / "b")
    assert again.path == first.path and again.commit == first.commit  # the same copy, not a new commit
    assert _git("rev-parse", "HEAD", cwd=first.path) == first.commit
    assert _git("status", "--porcelain", cwd=first.path) == ""  # every file committed
    (task_dir / "repo" / "main.py").write_text("print(2)\n")
    old = first.path.parent
    os.utime(old, (0, 0))  # unused for longer than BUNDLED_KEEP_S
    assert BUNDLED_KEEP_S < 1e9
    edited = place_repo(task, tmp_path / "c")
    assert edited.commit != first.commit and (edited.path / "main.py").read_text() == "print(2)\n"
    assert not old.exists()  # pruned when the new copy was built


def test_mirror_command_clones_updates_and_flags_a_missing_pin(tmp_path, mirror, monkeypatch):
    """`reb-ray mirror` against a real local 'forge' (git's insteadOf maps the task URL to it)."""
    from reb_ray.suite.mirror import update_mirrors

    forge, first, second = mirror
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", f"url.{forge}/.insteadOf")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", "https://github.com/")
    root = tmp_path / "made"
    said: list[str] = []
    (result,) = update_mirrors([_task(tmp_path, second), _task(tmp_path, first)], root, progress=said.append)
    assert (result.state, result.has_commit, result.repo) == ("cloned", True, "someone/tiny")
    assert said == ["mirroring someone/tiny (1 of 1)"]  # two tasks of one repository: fetched once
    (again,) = update_mirrors([_task(tmp_path, second)], root)
    assert again.state == "updated" and again.has_commit
    (missing,) = update_mirrors([_task(tmp_path, "2" * 40)], root)
    assert not missing.has_commit and "2" * 40 in missing.detail
    placed = place_repo(_task(tmp_path, first), tmp_path / "ws", [root])  # sweeps use it as --repo-mirror
    assert placed.commit == first


def test_mirror_missing_a_blob_is_an_infra_clone_error_naming_the_file(tmp_path, mirror):
    """Issue 9 item 16: `git checkout` prints `unable to read sha1 file` and exits 0 when the
    mirror lacks a blob; placement must refuse the incomplete checkout, naming the file."""
    mirrors, _first, second = mirror
    bare = mirrors / "someone" / "tiny.git"
    blob = _git("rev-parse", f"{second}:main.py", cwd=bare)
    loose = bare / "objects" / blob[:2] / blob[2:]
    assert loose.is_file()  # a fresh local clone keeps loose objects: the layout a partial copy leaves
    loose.unlink()
    plain = tmp_path / "plain"
    _git("clone", "-q", "--no-checkout", str(bare), str(plain), cwd=tmp_path)
    checkout = subprocess.run(["git", "checkout", "-q", "--detach", second], cwd=plain, capture_output=True, text=True)
    assert checkout.returncode == 0 and "unable to read sha1 file" in checkout.stderr  # git itself exits 0
    assert not (plain / "main.py").exists()
    with pytest.raises(InfraError) as err:
        place_repo(_task(tmp_path, second), tmp_path / "ws", [mirrors])
    assert err.value.category == "infra_clone"
    assert "first 'main.py'" in str(err.value) and "unable to read sha1 file" in str(err.value)
