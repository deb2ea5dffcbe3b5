"""The pinned tree from the harness's own checkout and the content comparison of
`reb_ray.trial.repo_outside`, on a real git repository (no sandbox: the reads from outside a
container are tests/sandbox/test_outside.py's)."""

from __future__ import annotations

import subprocess

from reb_ray.sandbox.base import git_blob
from reb_ray.trial.repo_outside import _differing, pinned_tree


def _repo(tmp_path):
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "train.py").write_text("print('train')\n")
    (repo / "pkg" / "data.txt").write_bytes(b"a\r\nb\r\n")
    (repo / "link").symlink_to("train.py")
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "pin"]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()
    return repo, commit


def test_the_pinned_tree_holds_every_file_and_link_with_git_s_own_hashes(tmp_path):
    repo, commit = _repo(tmp_path)
    tree = pinned_tree(str(repo), commit)
    assert sorted(tree) == ["link", "pkg/data.txt", "train.py"]
    assert tree["train.py"] == git_blob(b"print('train')\n")
    assert tree["link"] == git_blob(b"train.py")  # a link's blob is its target
    got = subprocess.run(["git", "hash-object", "--no-filters", "train.py"], cwd=repo, capture_output=True,
                         text=True, check=True).stdout.strip()
    assert tree["train.py"] == got


def test_content_that_is_the_blob_or_the_checkouts_own_bytes_matches_anything_else_differs(tmp_path):
    repo, commit = _repo(tmp_path)
    tree = pinned_tree(str(repo), commit)
    seen = dict(tree)
    assert _differing(tree, seen, repo) == []
    # the checkout holds other bytes than the blob (a line-ending rule): those bytes match too
    (repo / "pkg" / "data.txt").write_bytes(b"a\nb\n")
    seen["pkg/data.txt"] = git_blob(b"a\nb\n")
    assert _differing(tree, seen, repo) == []
    seen["train.py"] = git_blob(b"print('final loss 0.0')\n")  # replaced
    seen["link"] = None  # a directory now, or reached through a link
    assert _differing(tree, seen, repo) == ["link", "train.py"]
    del seen["pkg/data.txt"]  # missing from the sandbox
    assert _differing(tree, seen, repo) == ["link", "pkg/data.txt", "train.py"]
