"""The repository compared with the pinned commit by content, from outside the sandbox.

The in-sandbox restore (`reb_ray.trial.repo_restore`) asks the sandbox's git which tracked
files differ, and that git reads the agent's index, config and attributes: a file marked
`assume-unchanged` or `skip-worktree` is never compared, a clean filter makes any content hash
as the pinned blob, and the agent may have replaced `git` itself. So after it, every tracked
file is compared again by the harness:

- what the pinned tree holds comes from the harness's own copy of the pinned commit on the
  host (`git ls-tree` of the placed checkout), never from the sandbox's index;
- what the sandbox holds is read by the engine from outside it (`Sandbox.blobs_outside`: the
  container's merged overlay directory, or the engine's archive), each file's bytes hashed as
  a git blob here, links as their targets, no filter applied and no program of the sandbox run;
- a file matches when its content is the pinned blob, or the bytes the harness's checkout holds
  for it (a checkout's line-ending rules may write other bytes than the blob; those entered the
  sandbox as they are and are not the agent's).

Every tracked file that does not match is put back from the harness's checkout through the
engine (`put_tar`) and listed (`repo_outside_restored`, and in `repo_restored_files`);
`repo_restored` then says whether, read from outside again, every tracked file matches.
Untracked files (build outputs) stay. The hashes as they are then are the probe phase's
starting point: after its last stage they are read again, and a tracked file whose content
changed in between (`repo_probe_changed`) fails the stages that ran with it as the agent's
(`repo_changed_in_probes`, `reb_ray.grading.probe_changes`), since only the agent's code can
have changed it: the probes write no tracked file, and no honest task command does.
"""

from __future__ import annotations

import functools
import os
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

from reb_ray.errors import RebRayError
from reb_ray.grading.probe_changes import charge_probe_changes
from reb_ray.sandbox import Sandbox
from reb_ray.sandbox.base import git_blob
from reb_ray.trial.record import TrialRecorder
from reb_ray.trial.result import OutsideView

#: Seconds `git ls-tree` of the pinned commit may take on the host.
LS_TREE_TIMEOUT_S = 120.0


@functools.lru_cache(maxsize=16)
def pinned_tree(checkout: str, commit: str) -> dict[str, str]:
    """{path: blob hash} of every file and link of `commit`'s tree in the host repository
    `checkout` (submodules, which hold no file of the commit, left out). Cached per process:
    the same commit's tree for every trial of the task. Raises RebRayError when git cannot read it."""
    try:
        out = subprocess.run(["git", "-C", checkout, "ls-tree", "-r", "-z", "--full-tree", commit],
                             capture_output=True, timeout=LS_TREE_TIMEOUT_S, check=True).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise RebRayError(f"cannot list the pinned tree {commit[:12]} in {checkout}: {exc}") from None
    tree: dict[str, str] = {}
    for entry in out.split(b"\0"):
        meta, _, path = entry.partition(b"\t")
        words = meta.split()
        if len(words) == 3 and words[1] == b"blob":
            tree[path.decode(errors="surrogateescape")] = words[2].decode()
    return tree


def _checkout_blob(checkout: Path, path: str) -> str | None:
    """The blob hash of the host checkout's own bytes for `path` (None: not a file or link)."""
    target = checkout / path
    try:
        if target.is_symlink():
            return git_blob(os.fsencode(os.readlink(target)))
        return git_blob(target.read_bytes()) if target.is_file() else None
    except OSError:
        return None


def _differing(tree: dict[str, str], seen: dict[str, str | None], checkout: Path) -> list[str]:
    """Tracked paths whose content read from outside is neither the pinned blob nor the checkout's bytes."""
    return sorted(path for path, blob in tree.items()
                  if seen.get(path) != blob and (seen.get(path) is None or seen.get(path) != _checkout_blob(checkout, path)))


class RepoOutside:
    """One attempt's outside comparison: `restore` between the phases, `changed` after the last stage."""

    def __init__(self, part: OutsideView, repo_dir: str, checkout: Path | None, commit: str | None) -> None:
        self.part, self.repo_dir, self.checkout, self.commit = part, repo_dir, checkout, commit
        self.start: dict[str, str | None] | None = None  # the hashes the probe phase starts from

    def _read(self, sandbox: Sandbox, tree: dict[str, str]) -> dict[str, str | None] | None:
        t0 = time.monotonic()
        try:
            return sandbox.blobs_outside(self.repo_dir, sorted(tree))
        finally:
            self.part.outside_check_s = (self.part.outside_check_s or 0.0) + time.monotonic() - t0

    def _tree(self) -> dict[str, str] | None:
        if self.checkout is None or not self.commit:
            return None
        try:
            return pinned_tree(str(self.checkout), self.commit)
        except RebRayError:
            return None

    def restore(self, sandbox: Sandbox) -> dict | None:
        """Compare every tracked file from outside, put back those that differ and read them
        again. Returns the row's restore columns to apply over the in-sandbox restore's
        (`repo_restored`, the paths to add to `repo_restored_files`), None when the provider
        cannot read from outside or the pinned tree is unknown (then nothing changes)."""
        tree = self._tree()
        seen = self._read(sandbox, tree) if tree is not None else None
        if tree is None or seen is None:
            return None
        differ = _differing(tree, seen, self.checkout)
        self.part.repo_outside_restored = differ
        if differ:
            t0 = time.monotonic()
            try:
                self._put_back(sandbox, differ)
            except (RebRayError, OSError):
                pass
            self.part.outside_check_s = (self.part.outside_check_s or 0.0) + time.monotonic() - t0
            again = self._read(sandbox, {p: tree[p] for p in differ})
            if again is None:
                return {"repo_restored": None, "files": differ}
            seen.update(again)
        left = _differing(tree, seen, self.checkout)
        self.start = seen
        return {"repo_restored": not left, "files": differ}

    def _put_back(self, sandbox: Sandbox, paths: list[str]) -> None:
        """The checkout's copies of `paths` into the repository, through the engine."""
        assert self.checkout is not None
        with tempfile.TemporaryDirectory(prefix="reb-ray-restore-") as tmp:
            archive = Path(tmp) / "files.tar"
            with tarfile.open(archive, "w") as tar:
                for path in paths:
                    if (self.checkout / path).is_symlink() or (self.checkout / path).is_file():
                        tar.add(str(self.checkout / path), arcname=path, recursive=False)
            sandbox.put_tar(archive, self.repo_dir)

    def changed(self, sandbox: Sandbox) -> list[str] | None:
        """After the last stage: the tracked paths whose content, read from outside, is not what
        it was when the probe phase began (`repo_probe_changed`; None: unknown)."""
        tree = self._tree()
        if self.start is None or tree is None:
            return None
        now = self._read(sandbox, tree)
        if now is None:
            return None
        changed = sorted(path for path in tree if now.get(path) != self.start.get(path))
        self.part.repo_probe_changed = changed
        return changed


def charge_stages(rec: TrialRecorder, changed: list[str] | None) -> None:
    """Apply `charge_probe_changes` to the command stages already recorded (their verdicts and
    stage rows), as a re-grade with the row's `repo_probe_changed` would."""
    if not changed:
        return
    verdicts = rec.result.probe.verdicts
    for i, verdict in enumerate(verdicts):
        charged = charge_probe_changes(verdict, changed)
        if charged is verdict:
            continue
        verdicts[i] = charged
        row = next((s for s in reversed(rec.stages) if s.stage == verdict.stage), None)
        if row is not None:
            row.set(status=charged.status, reason=charged.reason, failure_category=charged.failure_category)
