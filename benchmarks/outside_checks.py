"""The cost of what the harness observes from outside a sandbox, per trial, median of N.

One Docker sandbox as a trial's, with a repository copied in at its pinned commit (the demo task
numpy-trainer's, and a synthetic one of FILES tracked files of 4 KiB, for a larger repository).
Timed, each N times (default 10), in wall seconds:

- `record`: what a sandbox's start now adds: its processes read from outside and mapped to
  their PIDs inside (`outside.own_at_start`; once per sandbox);
- `table`: one read of its process list from outside (`process_table`; twice per trial, before
  the first probe and after the last stage);
- `compare`: every tracked file hashed from outside and compared with the pinned tree
  (`RepoOutside.restore` with nothing to restore, and `changed`: twice per trial), by the
  merged overlay directory (this host) and by the engine's archive (an engine whose layers this
  process cannot read);
- `inside`: the in-sandbox restore that already ran (`restore_pinned`: one exec of git), for
  comparison.

The last line is the ratio of the per-trial total (record + 2 tables + 2 compares) to the
in-sandbox restore, e.g. `outside per trial / inside restore: 0.80x`. Exits non-zero on any error.

Usage: python benchmarks/outside_checks.py [N] [FILES]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's reb_ray, not an installed one

from reb_ray.sandbox.base import SandboxConfig  # noqa: E402
from reb_ray.sandbox.docker import outside  # noqa: E402
from reb_ray.sandbox.docker.docker_client import connect  # noqa: E402
from reb_ray.sandbox.docker.docker_sandbox import DockerSandbox  # noqa: E402
from reb_ray.sandbox.docker.image import build_image  # noqa: E402
from reb_ray.suite.load import load_suite  # noqa: E402
from reb_ray.suite.placement import bundled_checkout  # noqa: E402
from reb_ray.trial.repo_outside import RepoOutside, pinned_tree  # noqa: E402
from reb_ray.trial.repo_restore import restore_pinned  # noqa: E402
from reb_ray.trial.result import OutsideView  # noqa: E402


def _median(fn, n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _synthetic(root: Path, files: int) -> tuple[Path, str]:
    repo = root / "synthetic"
    for i in range(files):
        path = repo / f"pkg{i % 40}" / f"m{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text((f"# module {i}\n" + "x = 1\n" * 680)[:4096])
    env = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b",
           "PATH": "/usr/bin:/bin", "HOME": str(root)}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "pin"]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True)
    return repo, subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True,
                                check=True).stdout.strip()


def _measure(sb: DockerSandbox, checkout: Path, commit: str, name: str, n: int) -> tuple[float, float]:
    repo_dir = f"/work/{name}"
    sb.put(checkout, repo_dir)
    tree = pinned_tree(str(checkout), commit)
    check = RepoOutside(OutsideView(), repo_dir, checkout, commit)
    merged = _median(lambda: (check.restore(sb), check.changed(sb)), n) / 2
    archive = _median(lambda: outside._from_archive(sb.client.api, sb.id, repo_dir, sorted(tree)), n)
    inside = _median(lambda: restore_pinned(sb, repo_dir, commit, []), n)
    assert check.part.repo_outside_restored == [] and check.part.repo_probe_changed == [], "the copy differs"
    print(f"{name}: {len(tree)} tracked files: compare from outside {merged:.3f} s (merged overlay), "
          f"{archive:.3f} s (engine archive); in-sandbox restore {inside:.3f} s")
    return merged, inside


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    files = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    image = build_image(connect(), "minimal").tag
    task = next(t for t in load_suite("demo") if t.id == "numpy-trainer")
    checkout, commit = bundled_checkout(task)
    with tempfile.TemporaryDirectory() as tmp, DockerSandbox(SandboxConfig(image=image, workdir="/work")) as sb:
        record = _median(lambda: outside.own_at_start(sb.client.api, sb.id, lambda s: ""), n)
        table = _median(sb.process_table, n)
        print(f"processes: record at start {record:.3f} s, one list from outside {table:.3f} s")
        demo, inside = _measure(sb, checkout, commit, "numpy-trainer", n)
        big_repo, big_commit = _synthetic(Path(tmp), files)
        _measure(sb, big_repo, big_commit, "synthetic", n)
    per_trial = record + 2 * table + 2 * demo
    print(f"per trial (numpy-trainer): {per_trial:.3f} s")
    print(f"outside per trial / inside restore: {per_trial / inside:.2f}x")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as exc:  # a benchmark that hit an error exits non-zero
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
