"""Scratch directories named for their owner: a killed owner's are reaped, nobody else's."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from reb_ray.sandbox.ownership import Owner
from reb_ray.sandbox.scratch import PREFIXES, make_scratch, owner_of, place, reap_scratch

#: A process that makes one scratch directory of each kind under argv[1] with a file in each,
#: prints their paths and waits to be killed: an attempt's process killed mid-trial.
_OWNER = """
import sys, time
from pathlib import Path
from reb_ray.sandbox.scratch import PREFIXES, make_scratch
for prefix in PREFIXES:
    d = make_scratch(prefix, Path(sys.argv[1]))
    (d / "repo").mkdir()
    (d / "repo" / "train.py").write_text("print(1)")
    print(d, flush=True)
time.sleep(600)
"""


def _killed_owner(root: Path) -> list[Path]:
    proc = subprocess.Popen([sys.executable, "-c", _OWNER, str(root)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    try:
        made = [Path(proc.stdout.readline().strip()) for _ in PREFIXES]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    return made


def test_a_killed_owners_directories_are_removed_and_nobody_elses(tmp_path):
    dead = _killed_owner(tmp_path)
    assert all(d.is_dir() and (d / "repo" / "train.py").exists() for d in dead)
    mine = make_scratch("reb-ray-trial-", tmp_path)  # this process runs: kept
    foreign = tmp_path / "reb-ray-trial-abc123"  # a name without an owner (another tool, an older reb-ray): kept
    foreign.mkdir()
    other = tmp_path / "unrelated-1.2-x"
    other.mkdir()

    removed = reap_scratch(tmp_path)

    assert sorted(removed) == sorted(dead)
    assert not any(d.exists() for d in dead)
    assert mine.is_dir() and foreign.is_dir() and other.is_dir()


def test_the_name_gives_this_process_as_owner(tmp_path):
    d = make_scratch("reb-ray-artifacts-", tmp_path)
    assert d.name.startswith(f"reb-ray-artifacts-{os.getpid()}.")
    assert oct(d.stat().st_mode & 0o777) == "0o700"
    assert owner_of(d) == Owner.current()
    assert owner_of(tmp_path / f"reb-ray-trial-12.x.{place()}-abc") == Owner(Owner.current().host, 12, None)
    assert owner_of(tmp_path / "reb-ray-trial-abc") is None
    assert owner_of(tmp_path / "reb-ray-trial-12.x-abc") is None  # an older reb-ray's: no place
    elsewhere = "0" * 8 if place() != "0" * 8 else "1" * 8
    assert owner_of(tmp_path / f"reb-ray-trial-12.x.{elsewhere}-abc") is None


def test_a_recycled_pid_is_not_the_owner(tmp_path):
    """Our own pid with another start time: the directory's owner is gone, whatever runs now."""
    me = Owner.current()
    stale = tmp_path / f"reb-ray-trial-{me.pid}.{(me.start_ticks or 0) + 1}.{place()}-zz"
    stale.mkdir()
    assert reap_scratch(tmp_path) == [stale] and not stale.exists()


def test_an_unknown_prefix_is_refused(tmp_path):
    with pytest.raises(ValueError, match="reb-ray-other-"):
        make_scratch("reb-ray-other-", tmp_path)


#: Reaps `argv[1]` and prints what it removed: a sweep's start on a node in its own namespaces.
_REAPER = """
import sys
from pathlib import Path
from reb_ray.sandbox.scratch import place, reap_scratch
print(place(), [p.name for p in reap_scratch(Path(sys.argv[1]))])
"""


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare")
def test_a_reaper_in_another_pid_namespace_leaves_this_hosts_live_directories(tmp_path):
    """A node in its own PID and UTS namespaces (a container, `unshare`) sharing this /tmp: our
    pid is nobody there, yet the directory's owner runs; and its live directories are not ours
    to judge either."""
    mine = make_scratch("reb-ray-artifacts-", tmp_path)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    there = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "--uts", sys.executable, "-c", _REAPER,
                            str(tmp_path)], capture_output=True, text=True, env=env, timeout=60)
    assert there.returncode == 0, there.stderr
    their_place, removed = there.stdout.split(" ", 1)
    assert their_place != place() and removed.strip() == "[]" and mine.is_dir()
    # and the other way: a live owner over there (pid 1 or 2 in its namespace) is kept here
    owner = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", "--uts", "--kill-child", sys.executable, "-c", _OWNER,
                              str(tmp_path)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        theirs = [Path(owner.stdout.readline().strip()) for _ in PREFIXES]
        assert all(d.is_dir() for d in theirs)
        assert reap_scratch(tmp_path) == [] and all(d.is_dir() for d in theirs)
    finally:
        owner.kill()
        owner.wait(timeout=30)
