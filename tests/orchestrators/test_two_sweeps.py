"""Two sweeps on one node: two `reb-ray sweep` processes against one Docker daemon and one
iptables, each with its own local Ray and its own output directory, the same configuration
(so the same derived sweep id, trial ids and attempt numbers) and the same default networks.

Sweep B starts while sweep A's agents run, so B's start-up reaping and node check see A's live
containers; then one of A's slot workers is SIGKILLed while both sweeps run the same trial's
first attempt, so A's driver removes its dead attempt's container (by sweep, trial, attempt and
run) beside B's container of the same labels. After both: each trial of each sweep is scored
exactly once (B has no infra row at all: nothing of it was removed), every container of both
sweeps is gone, and reb-ray's networks and guard chains are still in place, as the node's.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import defaultdict

import pytest

from reb_ray.netpolicy import hostguard
from reb_ray.netpolicy.network import OPEN
from reb_ray.netpolicy.ports import sandbox_ports
from reb_ray.results.read import read_trials
from reb_ray.sandbox.ownership import MANAGED, RUN, SWEEP, TRIAL
from reb_ray.testing.ray_cluster import ROOT
from tests.orchestrators.test_faults import IN_TRIAL, assert_exactly_once, wait_for, write_suite

pytestmark = [pytest.mark.docker, pytest.mark.integration]

AGENT = "tests.helpers.scripted_agents:PauseAgent"  # in its agent phase until PAUSE_RELEASE exists, then a report


def _command(tmp_path, output: str) -> list[str]:
    return [sys.executable, "-c", "from reb_ray.cli import main; main()", "sweep", "--suite", "faults",
            "--tasks-root", str(tmp_path / "suites"), "--agents", AGENT, "--output", str(tmp_path / output),
            "--max-concurrent", "2", "--no-pip-cache", "--keep-environments", "none", "--quiet"]


def _containers(client, sweep_id: str | None = None) -> list:
    labels = [f"{MANAGED}=true", f"{SWEEP}={sweep_id}"] if sweep_id else [f"{MANAGED}=true"]
    return client.containers.list(all=True, ignore_removed=True, filters={"label": labels})


def _runs(client, trial_ids: list[str]) -> dict[str, set[str]]:
    """{run label: trial ids} of the running containers of these trials."""
    runs = defaultdict(set)
    for container in client.containers.list(ignore_removed=True, filters={"label": f"{MANAGED}=true"}):
        if container.labels.get(TRIAL) in trial_ids and RUN in container.labels:
            runs[container.labels[RUN]].add(container.labels[TRIAL])
    return runs


def _alive(tmp_path, **procs) -> None:
    """Fail at once, with its output, when a sweep process ended before the test got there."""
    for name, proc in procs.items():
        if proc.poll() is not None:
            out = (tmp_path / f"{name}.out").read_text()[-3000:]
            pytest.fail(f"sweep {name.upper()} ended early (exit {proc.returncode}): {out}")


def _descends_from(pid: int, ancestor: int) -> bool:
    while pid > 1:
        if pid == ancestor:
            return True
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            return False
        pid = int(stat[stat.rfind(")") + 2:].split()[1])
    return False


def _slot_workers_in_trial(driver_pid: int) -> list[int]:
    """Pids of the slot workers in a trial of the local Ray that `driver_pid` started."""
    pids = []
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                title = f.read().decode(errors="replace")
        except OSError:
            continue
        if title.startswith(IN_TRIAL) and _descends_from(pid, driver_pid):
            pids.append(pid)
    return pids


@pytest.mark.timeout(900)
def test_two_sweeps_on_one_node_keep_each_others_containers_networks_and_chains(tmp_path, docker_client,
                                                                                 sandbox_image):
    tasks = [t.replace("noop/", f"{AGENT}/") for t in write_suite(tmp_path / "suites", 2)]
    release = tmp_path / "release"  # the agents hold their trials until it exists
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
           "PAUSE_RELEASE": str(release)}
    started = time.monotonic()
    a = subprocess.Popen(_command(tmp_path, "runs-a"), cwd=ROOT, env=env, stdout=open(tmp_path / "a.out", "w"),
                         stderr=subprocess.STDOUT, text=True)
    b = None
    try:
        # A's two agents run: B starts now (its reap and node check see A's live containers).
        run_a = wait_for(lambda: _alive(tmp_path, a=a) or next((r for r, t in _runs(docker_client, tasks).items() if len(t) == 2), None), 240,
                         "sweep A's two agents running")
        b = subprocess.Popen(_command(tmp_path, "runs-b"), cwd=ROOT, env=env, stdout=open(tmp_path / "b.out", "w"),
                             stderr=subprocess.STDOUT, text=True)
        both = wait_for(lambda: _alive(tmp_path, a=a, b=b) or (lambda runs: len(runs) == 2 and all(len(t) == 2 for t in runs.values()) and runs)(
            _runs(docker_client, tasks)), 240, "both sweeps' two agents running at once")
        (run_b,) = set(both) - {run_a}
        b_before = {c.id for c in _containers(docker_client) if c.labels.get(RUN) == run_b}
        # SIGKILL one of A's slot workers: its trial's first attempt runs in B too, and A's driver
        # removes that attempt's container.
        victim = wait_for(lambda: _slot_workers_in_trial(a.pid), 10, "sweep A's slot workers")[0]
        os.kill(victim, signal.SIGKILL)
        killed_at = time.monotonic()
        # A's driver removed the dead attempt's container and started its retry: B's are all there.
        wait_for(lambda: [c for c in _containers(docker_client) if c.labels.get(RUN) == run_a
                          and c.labels.get("reb-ray.attempt") == "2"], 120, "sweep A's retry")
        retried_s = time.monotonic() - killed_at
        alive_b = {c.id for c in docker_client.containers.list(ignore_removed=True) if c.labels.get(RUN) == run_b}
        assert alive_b == b_before, "sweep A removed a container of sweep B"
        release.touch()  # every agent writes its report now; A's retry started paused too
        a.wait(timeout=400)
        b.wait(timeout=400)
    finally:
        release.touch()
        for proc in (a, b):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    wall_s = time.monotonic() - started
    out_a, out_b = (tmp_path / "a.out").read_text(), (tmp_path / "b.out").read_text()
    assert a.returncode == 0, out_a
    assert b.returncode == 0, out_b
    rows_a = read_trials(tmp_path / "runs-a").to_pylist()
    rows_b = read_trials(tmp_path / "runs-b").to_pylist()
    assert {r["sweep_id"] for r in rows_a} == {r["sweep_id"] for r in rows_b}  # one configuration, one sweep id
    by_a = assert_exactly_once(rows_a, tasks)
    by_b = assert_exactly_once(rows_b, tasks)
    # A: its killed attempt is an infra row, retried once. B: untouched, one scored attempt each.
    assert len(rows_a) == 3 and sum(len(v) == 2 for v in by_a.values()) == 1, rows_a
    assert [r["failure_category"] for v in by_a.values() for r in v if r["status"] != "scored"] == ["infra_node"]
    assert len(rows_b) == 2 and all(r["status"] == "scored" and r["attempt"] == 1 for r in rows_b), rows_b
    for row in rows_a + rows_b:
        if row["status"] == "scored":
            assert row["report_status"] == "ok", row  # each scored agent ran to its report: never cut off
    assert b_before  # B's containers existed when A's attempt was removed, and B scored them all
    # Nothing left of either, and the node's networks and guard chains are as a sweep leaves them.
    sweep_id = rows_a[0]["sweep_id"]
    assert _containers(docker_client, sweep_id) == []
    assert docker_client.images.list(filters={"label": [f"{MANAGED}=true", f"{SWEEP}={sweep_id}"]}) == []
    network = docker_client.networks.get(OPEN.name)
    gateway = network.attrs["IPAM"]["Config"][0]["Gateway"]
    table = subprocess.run(["iptables", "-S"], capture_output=True, text=True, check=True).stdout.splitlines()
    assert [line for line in table if line.startswith(f"-A {OPEN.chain} ")] == \
        hostguard.chain_rules(gateway, sandbox_ports(), OPEN.chain)
    assert table.count(f"-A INPUT -i {OPEN.bridge} -j {OPEN.chain}") == 1
    print(f"\ntwo sweeps on one node: both done in {wall_s:.1f} s, A's slot worker killed "
          f"{killed_at - started:.1f} s in, its retry running {retried_s:.1f} s later with B's {len(b_before)} "
          f"containers all running; rows A {len(rows_a)} (1 infra_node + 2 scored), B {len(rows_b)} "
          f"(2 scored); containers left: 0")
