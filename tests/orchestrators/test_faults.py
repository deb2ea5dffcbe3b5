"""Exactly once under faults (issue 13, item 6; F13, F20): a real multi-raylet Ray cluster on
this machine (reb_ray/testing/ray_cluster.py), a fault in the middle of a sweep, and then the rows.

(a) SIGKILL a slot worker mid-trial; (b) SIGKILL a worker node's raylet (node death), with the
sleeping sandbox and with Docker; (c) SIGKILL the driver (`reb-ray sweep` in a subprocess) and
run the same command again; (d) restart the Docker daemon (a private one: tests/helpers/private_dockerd.py)
during a sweep. After each: every trial has exactly one scored row, as its last attempt, the
attempts before it infra rows (the resume retries those); no scored trial ran twice (the
sleeping sandbox's ledger: one closed sandbox per trial); none of our containers is left. Each
test prints the seconds from the fault to the retried attempt's start (its row's `started_at`).

(a) and (c) kill a slot worker and a driver, never a node: they share one two-node cluster
(`two_nodes`), each with its own sweep, script and ledger. The node deaths (b) run on clusters of
their own whose GCS checks its raylets fast (reb_ray.testing.ray_cluster.FAST_HEALTH_CHECKS): what
they test is what follows the GCS's verdict, not how long Ray's defaults take to reach it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import defaultdict
from pathlib import Path

import pytest

from reb_ray.models.sweep import SweepConfig
from reb_ray.results.read import read_trials
from reb_ray.sandbox.ownership import MANAGED, SWEEP
from reb_ray.testing.ray_cluster import FAST_HEALTH_CHECKS, ROOT, actor_pids, kill_raylet, ray_cluster
from reb_ray.testing.suite import write_task

pytestmark = pytest.mark.integration

IN_TRIAL = "ray::SlotWorker.run"  # a slot worker's process title while it runs a trial


def write_suite(root: Path, n: int) -> list[str]:
    """`n` CPU-only tasks f0..f{n-1} with one-file bundled repositories; their trial ids (noop)."""
    for i in range(n):
        write_task(root, "faults", f"f{i}", cpu='command = "echo cpu-ok"')
    return [f"noop/f{i}/0" for i in range(n)]


def sleep_env(tmp_path: Path, agent_s: dict[str, float], ledger: Path | None = None) -> tuple[dict[str, str], Path]:
    """The sleeping sandbox's script ({trial_id: agent seconds}, probes 0.1 s) as the raylets'
    environment, and its ledger (one line per sandbox that closed; `tmp_path`/ledger.jsonl
    unless named). The script is read once per worker process, so rewriting it changes what the
    next sweep's (new) slot workers do on the same cluster."""
    script, ledger = tmp_path / "script.json", ledger or tmp_path / "ledger.jsonl"
    script.write_text(json.dumps({"trials": {t: {"agent_s": s, "probe_s": 0.1} for t, s in agent_s.items()},
                                  "ledger": str(ledger)}))
    return {"REB_RAY_SLEEP_SCRIPT": str(script)}, ledger


def ledger_attempts(ledger: Path) -> dict[str, list[int]]:
    """{trial_id: attempts whose sandbox closed}: an attempt that ran to its end."""
    closed = defaultdict(list)
    for line in ledger.read_text().splitlines() if ledger.exists() else []:
        entry = json.loads(line)
        closed[entry["trial_id"]].append(entry["attempt"])
    return dict(closed)


def assert_exactly_once(rows: list[dict], trial_ids: list[str]) -> dict[str, list[dict]]:
    """Every trial: attempts numbered without repeats, exactly one scored row and it is the
    last, every earlier one an infra row (owner infra). Returns {trial_id: its rows by attempt}."""
    by_trial = defaultdict(list)
    for row in rows:
        by_trial[row["trial_id"]].append(row)
    assert sorted(by_trial) == sorted(trial_ids)
    for trial_id, attempts in by_trial.items():
        attempts.sort(key=lambda r: r["attempt"])
        numbers = [r["attempt"] for r in attempts]
        assert len(set(numbers)) == len(numbers), (trial_id, numbers)
        assert [r["status"] for r in attempts].count("scored") == 1 and attempts[-1]["status"] == "scored", \
            (trial_id, [(r["attempt"], r["status"], r["failure_category"]) for r in attempts])
        for row in attempts[:-1]:
            assert (row["status"], row["failure_owner"]) == ("infra_error", "infra"), row
    return dict(by_trial)


def retry_delay(by_trial: dict[str, list[dict]], trial_id: str, fault_at: float) -> float:
    """Seconds from the fault (time.time()) to the start of `trial_id`'s scored attempt."""
    return by_trial[trial_id][-1]["started_at"].timestamp() - fault_at


def wait_for(predicate, timeout_s: float, what: str):
    """Poll `predicate` every 0.1 s until it returns something true; fails naming `what`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.1)
    pytest.fail(f"timed out after {timeout_s:g} s waiting for {what}")


def run_in_thread(config: SweepConfig) -> tuple[threading.Thread, dict]:
    """run_sweep(config) in a thread; its result (or error) lands in the returned dict."""
    from reb_ray.sweep.run import run_sweep

    box: dict = {}

    def target() -> None:
        try:
            box["result"] = run_sweep(config, show_progress=False)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, box


def join(thread: threading.Thread, box: dict, timeout_s: float):
    thread.join(timeout_s)
    assert not thread.is_alive(), f"the sweep did not end within {timeout_s:g} s"
    if "error" in box:
        raise box["error"]
    return box["result"]


def config_for(tmp_path: Path, **extra) -> SweepConfig:
    return SweepConfig(output=tmp_path / "runs", suite="faults", tasks_root=tmp_path / "suites", agents=["noop"],
                       sweep_id=f"faults-{uuid.uuid4().hex[:8]}", **extra)


@pytest.fixture(scope="class")
def two_nodes(tmp_path_factory):
    """A two-node cluster (2 CPUs each) whose raylets read the sleeping sandbox's script from
    one directory, `where` (each test writes its own there: `sleep_env(where, ..., ledger=...)`,
    read by its sweep's new slot workers). Not connected: a test that drives in this process
    connects itself. Yields (cluster, where)."""
    where = tmp_path_factory.mktemp("two-nodes")
    env, _ = sleep_env(where, {})
    with ray_cluster({"num_cpus": 2}, {"num_cpus": 2}, env=env, connect=False) as cluster:
        yield cluster, where


class TestOnTwoNodes:
    """(a) and (c): faults that leave every node alive, on one shared cluster."""

    def test_a_slot_worker_killed_mid_trial(self, tmp_path, two_nodes):
        _slot_worker_killed_mid_trial(tmp_path, *two_nodes)

    def test_c_the_driver_killed_mid_sweep_then_the_same_command_again(self, tmp_path, two_nodes):
        _driver_killed_mid_sweep_then_the_same_command_again(tmp_path, *two_nodes)


def _slot_worker_killed_mid_trial(tmp_path, cluster, where: Path):
    """(a) The killed attempt is one infra_node row; the retry starts on a new worker and is
    the trial's only scored row; the other trials are untouched."""
    import ray

    trial_ids = write_suite(tmp_path / "suites", 4)
    _, ledger = sleep_env(where, {t: 3.0 for t in trial_ids}, ledger=tmp_path / "ledger.jsonl")
    ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
    try:
        thread, box = run_in_thread(config_for(tmp_path, sandbox="sleep"))
        pid = next(iter(wait_for(lambda: actor_pids(cluster, IN_TRIAL), 90, "a slot worker in a trial")))
        time.sleep(1.0)  # inside the agent's sleep
        fault_at = time.time()
        os.kill(pid, signal.SIGKILL)
        result = join(thread, box, 90)
    finally:
        ray.shutdown()
    rows = read_trials(tmp_path / "runs").to_pylist()
    by_trial = assert_exactly_once(rows, trial_ids)
    (killed,) = [t for t, attempts in by_trial.items() if len(attempts) > 1]
    dead = by_trial[killed][0]
    assert (dead["attempt"], dead["failure_category"]) == (1, "infra_node") and len(by_trial[killed]) == 2
    assert result.attempts == 5 and len(rows) == 5
    assert ledger_attempts(ledger) == {t: [2 if t == killed else 1] for t in trial_ids}  # the dead one never closed
    print(f"\n(a) slot worker SIGKILL: retried attempt started {retry_delay(by_trial, killed, fault_at):.2f} s after "
          f"the fault; rows {len(rows)} (1 infra_node + {len(trial_ids)} scored), containers: none (sleep sandbox)")


def _kill_node_running_a_trial(cluster) -> float:
    """SIGKILL the raylet of a worker node (never the head: the driver's) while one of its slot
    workers runs a trial; time.time() of the kill."""
    def busy_worker_node():
        nodes = [node for node in actor_pids(cluster, IN_TRIAL).values() if node is not cluster.head_node]
        return nodes and nodes[0]

    node = wait_for(busy_worker_node, 120, "a worker node's slot worker in a trial")
    time.sleep(1.0)
    fault_at = time.time()
    kill_raylet(node)
    return fault_at


def test_b_a_worker_node_dies_mid_trial_sleeping_sandbox(tmp_path):
    """(b) The dead node's attempts are infra_node rows, retried at once on the other node's
    free slots; no slot is restarted on the dead node. (The head, where the driver is, holds
    no slot: it is never the node that dies.)"""
    trial_ids = write_suite(tmp_path / "suites", 2)
    env, ledger = sleep_env(tmp_path, {t: 6.0 for t in trial_ids})
    with ray_cluster({"num_cpus": 0}, {"num_cpus": 2}, {"num_cpus": 2}, env=env, health_checks=FAST_HEALTH_CHECKS) as cluster:
        thread, box = run_in_thread(config_for(tmp_path, sandbox="sleep"))
        fault_at = _kill_node_running_a_trial(cluster)
        result = join(thread, box, 110)
    rows = read_trials(tmp_path / "runs").to_pylist()
    by_trial = assert_exactly_once(rows, trial_ids)
    retried = sorted(t for t, attempts in by_trial.items() if len(attempts) > 1)
    assert retried  # the dead node's trials (one or both: the dispatcher may have put both there)
    for trial_id in retried:
        assert by_trial[trial_id][0]["failure_category"] == "infra_node", by_trial[trial_id][0]
    assert result.attempts == len(rows) == len(trial_ids) + len(retried)
    # The dead node's workers died with it: none of their sandboxes ran to its end.
    assert ledger_attempts(ledger) == {t: [by_trial[t][-1]["attempt"]] for t in trial_ids}
    seen = ", ".join(f"{by_trial[t][0]['finished_at'].timestamp() - fault_at:.2f}" for t in retried)
    delays = ", ".join(f"{retry_delay(by_trial, t, fault_at):.2f}" for t in retried)
    print(f"\n(b) raylet SIGKILL (sleep): the driver saw the dead attempt(s) {seen} s and their retries started "
          f"{delays} s after the fault; rows {len(rows)} ({len(retried)} infra_node + {len(trial_ids)} scored), "
          "containers: none (sleep sandbox)")


def _our_containers(client, sweep_id: str) -> list:
    return client.containers.list(all=True, filters={"label": [f"{MANAGED}=true", f"{SWEEP}={sweep_id}"]})


@pytest.mark.docker
def test_b_a_worker_node_dies_mid_trial_docker(tmp_path, docker_client, sandbox_image, monkeypatch):
    """(b) with Docker: the dead node's container (its owner, the slot worker, died with the
    raylet; on this machine every node shares one daemon) is removed by the end of the sweep,
    and the trial is scored once, on the node left."""
    write_suite(tmp_path / "suites", 1)
    monkeypatch.setenv("SLEEP_ONCE_FLAG", str(tmp_path / "flag"))
    agent = "tests.helpers.scripted_agents:SleepOnceAgent"  # sleeps 300 s in the sandbox the first time only
    config = SweepConfig(output=tmp_path / "runs", suite="faults", tasks_root=tmp_path / "suites", agents=[agent],
                         sweep_id=f"faults-{uuid.uuid4().hex[:8]}", wheelhouses=[], pip_cache=False)
    # The head has no CPU for a slot: the trial starts on the worker node; after its death a
    # slot on the second worker takes the retry.
    with ray_cluster({"num_cpus": 0}, {"num_cpus": 1}, {"num_cpus": 1}, health_checks=FAST_HEALTH_CHECKS) as cluster:
        thread, box = run_in_thread(config)
        try:
            wait_for(lambda: (tmp_path / "flag").exists() and _our_containers(docker_client, config.resume.sweep_id), 120,
                     "the agent running in its container")
            time.sleep(1.0)
            pids = actor_pids(cluster, IN_TRIAL)
            ((_, node),) = pids.items()
            fault_at = time.time()
            kill_raylet(node)
            result = join(thread, box, 110)
            left = _our_containers(docker_client, config.resume.sweep_id)
        finally:
            for container in _our_containers(docker_client, config.resume.sweep_id):
                container.remove(force=True)
    trial_ids = [f"{agent}/f0/0"]
    rows = read_trials(config.output.dir).to_pylist()
    by_trial = assert_exactly_once(rows, trial_ids)
    dead, scored = by_trial[trial_ids[0]]
    assert dead["failure_category"] == "infra_node" and result.attempts == 2
    assert left == [], f"the dead node's container is left: {[c.name for c in left]}"
    print(f"\n(b) raylet SIGKILL (docker): retried attempt started {retry_delay(by_trial, trial_ids[0], fault_at):.2f} s "
          f"after the fault; rows 2 (1 infra_node + 1 scored); our containers after the sweep: {len(left)}; "
          f"dead attempt: {dead['failure_reason']}")


def _sweep_command(config: SweepConfig, address: str) -> list[str]:
    return [sys.executable, "-c", "from reb_ray.cli import main; main()", "sweep", "--suite", "faults",
            "--tasks-root", str(config.tasks_root), "--agents", "noop", "--sandbox", "sleep", "--output",
            str(config.output.dir), "--address", address, "--sweep-id", config.resume.sweep_id, "--quiet"]


def _driver_killed_mid_sweep_then_the_same_command_again(tmp_path, cluster, where: Path):
    """(c) SIGKILL `reb-ray sweep` while two trials run and two are scored: the killed attempts
    leave no row and their workers die with the driver; the same command again skips the two
    scored trials and runs the other two once each."""
    trial_ids = write_suite(tmp_path / "suites", 4)
    ledger = tmp_path / "ledger.jsonl"
    sleep_env(where, {"noop/f0/0": 0.5, "noop/f1/0": 0.5, "noop/f2/0": 12.0, "noop/f3/0": 12.0}, ledger=ledger)
    config = config_for(tmp_path, sandbox="sleep")
    command = _sweep_command(config, cluster.address)
    driver = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        def two_scored_two_running():
            if driver.poll() is not None:
                pytest.fail(f"the sweep ended before the fault: {driver.stdout.read()}")
            try:
                scored = [r for r in read_trials(config.output.dir, config.resume.sweep_id).to_pylist() if r["status"] == "scored"]
            except Exception:  # noqa: BLE001 - nothing written yet
                return False
            return len(scored) == 2 and len(actor_pids(cluster, IN_TRIAL)) == 2

        wait_for(two_scored_two_running, 90, "two trials scored and two running")
        closed_before = ledger_attempts(ledger)
        fault_at = time.time()
        driver.send_signal(signal.SIGKILL)
        driver.wait(10)
    finally:
        driver.kill()
    # The driver owned the slot workers: Ray ends them, so nothing keeps running a trial.
    wait_for(lambda: not actor_pids(cluster, "ray::SlotWorker"), 60, "the dead driver's slot workers to end")
    workers_gone_s = time.time() - fault_at
    # The two attempts that run again need not sleep 12 s: the rerun's slot workers are new
    # processes, and they read the script anew.
    sleep_env(where, {f"noop/f{i}/0": 0.5 for i in range(4)}, ledger=ledger)
    again = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=100)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "2 attempt(s) run, 2 already scored" in again.stdout, again.stdout
    rows = read_trials(config.output.dir).to_pylist()
    by_trial = assert_exactly_once(rows, trial_ids)
    assert len(rows) == 4 and all(len(a) == 1 for a in by_trial.values())  # the killed attempts wrote nothing
    # The two scored before the fault never ran again. (A trial whose sandbox closed but whose row
    # the driver had not written yet when it died would run again, once: it has no row.)
    closed = ledger_attempts(ledger)
    assert closed_before == {"noop/f0/0": [1], "noop/f1/0": [1]}
    assert {t: closed[t] for t in closed_before} == closed_before and all(closed[t] for t in trial_ids)
    delays = ", ".join(f"{retry_delay(by_trial, t, fault_at):.2f}" for t in ("noop/f2/0", "noop/f3/0"))
    print(f"\n(c) driver SIGKILL: its slot workers gone {workers_gone_s:.2f} s after the fault; the rerun's attempts "
          f"started {delays} s after it; rows 4 (4 scored, none for the killed attempts), containers: none (sleep sandbox)")


@pytest.fixture
def private_dockerd(tmp_path_factory, sandbox_image):
    """A private Docker daemon (tests/helpers/private_dockerd.py) holding the sandbox image; removed after."""
    from tests.helpers.private_dockerd import PrivateDockerd

    dockerd = PrivateDockerd(tmp_path_factory.mktemp("dockerd"))
    try:
        dockerd.start()
        dockerd.load(sandbox_image)
        yield dockerd
    finally:
        dockerd.close()


def _running_agents(client, sweep_id: str) -> int:
    """Our containers of `sweep_id` whose agent (`sleep 8`) runs."""
    n = 0
    for container in client.containers.list(filters={"label": [f"{MANAGED}=true", f"{SWEEP}={sweep_id}"]}):
        try:
            n += any("sleep 8" in " ".join(p) for p in container.top()["Processes"])
        except Exception:  # noqa: BLE001 - starting or going
            pass
    return n


@pytest.mark.docker
def test_d_the_docker_daemon_restarts_mid_sweep(tmp_path, private_dockerd, monkeypatch):
    """(d) F20: a graceful restart of the Docker daemon while two agents run: the in-flight
    attempts become infra rows, their retries run once the daemon answers and are scored once;
    no container is left. A private daemon with no bridge: the sweep sets network = "none"."""
    import docker

    (tmp_path / "slept").mkdir()
    monkeypatch.setenv("SLEEP_AGENT_FLAGS", str(tmp_path / "slept"))  # the agent sleeps 8 s in first attempts only
    agent = "tests.helpers.scripted_agents:SleepAgent"
    write_suite(tmp_path / "suites", 2)
    trial_ids = [f"{agent}/f{i}/0" for i in range(2)]
    config = SweepConfig(output=tmp_path / "runs", suite="faults", tasks_root=tmp_path / "suites", agents=[agent],
                         sweep_id=f"faults-{uuid.uuid4().hex[:8]}", wheelhouses=[], pip_cache=False, network="none")
    client = docker.DockerClient(base_url=private_dockerd.host, timeout=30)
    with ray_cluster({"num_cpus": 2}, {"num_cpus": 2}, env={"DOCKER_HOST": private_dockerd.host}):
        thread, box = run_in_thread(config)
        wait_for(lambda: _running_agents(client, config.resume.sweep_id) == 2, 120, "both agents running in their sandboxes")
        fault_at = time.time()
        private_dockerd.stop()
        stopped_s = time.time() - fault_at
        time.sleep(2.0)  # the daemon is down for a while: calls in that window must fail fast, not hang
        private_dockerd.start()
        up_s = time.time() - fault_at
        result = join(thread, box, 110)
    left = client.containers.list(all=True, filters={"label": f"{MANAGED}=true"})
    rows = read_trials(config.output.dir).to_pylist()
    by_trial = assert_exactly_once(rows, trial_ids)
    for trial_id in trial_ids:
        first = by_trial[trial_id][0]
        assert (first["status"], first["failure_owner"]) == ("infra_error", "infra"), first
    assert left == [], [c.name for c in left]
    delays = ", ".join(f"{retry_delay(by_trial, t, fault_at):.2f}" for t in trial_ids)
    reasons = "; ".join(by_trial[t][0]["failure_reason"] for t in trial_ids)
    print(f"\n(d) dockerd restart: stopped {stopped_s:.2f} s and answering {up_s:.2f} s after the fault; retried "
          f"attempts started {delays} s after it; rows {len(rows)} ({result.infra_errors} infra + "
          f"{result.scored} scored); our containers after the sweep: {len(left)}; dead attempts: {reasons}")
