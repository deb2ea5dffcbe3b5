"""Issue 11: sandbox limits fire as the agent's failure, and the node carries on (real Docker)."""

from __future__ import annotations

import time

import pytest

from reb_ray.sandbox import SandboxConfig
from reb_ray.sandbox.docker.docker_sandbox import DockerSandbox
from reb_ray.sandbox.limits import LimitWatch, default_memory_bytes, watch_limits

MiB = 1024**2
# Every process forks forever, ignoring refused forks: it sits at any pids limit.
FORK_BOMB = "import os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        time.sleep(0.01)\n"


@pytest.fixture
def box(sandbox_image):
    made = []

    def make(**overrides) -> DockerSandbox:
        sandbox = DockerSandbox(SandboxConfig(image=sandbox_image, sweep_id="test", trial_id="limits", **overrides))
        made.append(sandbox)
        return sandbox

    yield make
    for sandbox in made:
        sandbox.close()


def test_default_memory_is_the_nodes_share_per_slot():
    import os

    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    cpus = os.cpu_count()
    assert default_memory_bytes(1.0, None) == int(total * 0.8 / cpus)
    assert default_memory_bytes(float(cpus * 4), None) == int(total * 0.8)  # a trial wider than the node: 1 slot
    assert default_memory_bytes(0.25, 1) == int(total * 0.8)  # one trial at a time: all of it


def test_a_fork_bomb_is_stopped_at_the_pids_limit_and_the_node_carries_on(box):
    sandbox = box(pids_limit=200)
    start = time.monotonic()
    with LimitWatch(sandbox, sandbox.config.pids_limit, None, interval_s=0.5) as watch:
        bomb = sandbox.exec(["python3", "-c", FORK_BOMB], timeout=120)
    assert watch.fired == "pids_limit" and "pids_limit=200" in watch.detail
    assert time.monotonic() - start < 60 and not bomb.timed_out
    assert watch.verdict(bomb.exit_code, bomb.timed_out)[0] == "pids_limit"
    other = box()  # another trial on the node starts and runs
    assert other.exec("echo alive").output.strip() == "alive"


def test_filling_the_disk_past_the_quota_stops_the_agent(box):
    sandbox = box(disk_quota_bytes=100 * MiB)
    with watch_limits(sandbox, interval_s=0.5) as watch:
        filled = sandbox.exec("i=0; while [ $i -lt 60 ]; do head -c 20000000 /dev/urandom > /work/f$i; i=$((i+1)); sleep 0.2; done",
                              timeout=300)
    assert watch.fired == "disk_quota" and not filled.ok
    assert 100 * MiB < watch.disk_peak_bytes < 1200 * MiB  # stopped well before writing its 1.2 GB


def test_an_oom_kill_of_the_agent_is_oom(box):
    sandbox = box(memory_bytes=64 * MiB)
    with watch_limits(sandbox, interval_s=0.5) as watch:
        hog = sandbox.exec("python3 -c 'x = bytearray(400 * 1024 * 1024); print(len(x))'", timeout=120)
    assert hog.exit_code != 0
    category, detail = watch.verdict(hog.exit_code, hog.timed_out)
    assert category == "oom" and watch.oom_kills >= 1, detail


def test_a_normal_agent_fires_nothing(box):
    sandbox = box(disk_quota_bytes=100 * MiB, memory_bytes=512 * MiB)
    with watch_limits(sandbox, interval_s=0.5) as watch:
        ok = sandbox.exec("head -c 10000000 /dev/zero > /work/small; sleep 2")
    assert ok.ok and watch.verdict(ok.exit_code, ok.timed_out) is None and watch.oom_kills == 0
    assert watch.disk_peak_bytes >= 10_000_000
