"""The head's death mid-sweep, on a real multi-raylet Ray cluster on this machine
(reb_ray/testing/ray_cluster.py): its GCS server SIGKILLed, or (separately) its raylet, while two
trials are scored and two run, with `reb-ray sweep` as the driver in a subprocess on the head.

The driver's head watch (reb_ray/orchestrators/head_watch.py) must end the sweep itself, long
before Ray's own fatal exit 60 s after the GCS is gone: one line on its output naming what died
and how to resume, exit status HEAD_LOST_EXIT, and every row it counted as written on disk. Then
the cluster is started again at the same address and the very same command finishes the sweep:
every trial scored once, the two scored before the fault never run again (the sleeping
sandbox's ledger), the two in flight run once more. Prints the seconds from the kill to the line.

What the resume starts from is the same after either death (asserted for both: the same two rows
on disk, the same line, the same exit), and it runs on a new cluster: it is run once, after the
GCS's death.
"""

from __future__ import annotations

import re
import socket
import subprocess
import threading
import time

import pytest

from reb_ray.orchestrators.head_watch import HEAD_LOST_EXIT
from reb_ray.results.read import read_trials
from reb_ray.testing.ray_cluster import ROOT, actor_pids, kill_gcs, kill_raylet, ray_cluster
from tests.orchestrators.test_faults import (IN_TRIAL, _sweep_command, assert_exactly_once, config_for, ledger_attempts,
                                             sleep_env, wait_for, write_suite)

pytestmark = pytest.mark.integration

LINE = re.compile(r"^error: the sweep stopped: (?P<what>.+?) at \S+ is gone \(.+\); (?P<written>\d+) attempt\(s\) written "
                  r"\((?P<scored>\d+) scored\), (?P<running>\d+) in flight have no row and run again on resume; restart "
                  r"the cluster at the same address and run the same command to resume$")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _read_lines(stream, lines: list[tuple[float, str]]) -> threading.Thread:
    """Collect (time.time(), line) of every line `stream` prints, in a thread."""
    def run() -> None:
        for line in stream:
            lines.append((time.time(), line.rstrip("\n")))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("fault", ["gcs", "raylet"])
def test_the_heads_death_mid_sweep_one_line_no_row_lost_and_the_same_command_resumes(tmp_path, fault):
    trial_ids = write_suite(tmp_path / "suites", 4)
    # Two trials end before the fault; two are in their agent phase at it (long enough that
    # their sandboxes are still open when the dead cluster is shut down).
    env, ledger = sleep_env(tmp_path, {"noop/f0/0": 0.5, "noop/f1/0": 0.5, "noop/f2/0": 40.0, "noop/f3/0": 40.0})
    config = config_for(tmp_path, sandbox="sleep")
    head = {"num_cpus": 0, "gcs_server_port": _free_port()}  # the same GCS port for the restarted cluster
    with ray_cluster(head, {"num_cpus": 4}, env=env, connect=False) as cluster:
        address = cluster.address
        command = _sweep_command(config, address)
        driver = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines: list[tuple[float, str]] = []
        reader = _read_lines(driver.stdout, lines)
        try:
            def two_scored_two_running():
                if driver.poll() is not None:
                    pytest.fail(f"the sweep ended before the fault: {lines}")
                try:
                    scored = [r for r in read_trials(config.output.dir, config.resume.sweep_id).to_pylist() if r["status"] == "scored"]
                except Exception:  # noqa: BLE001 - nothing written yet
                    return False
                return len(scored) == 2 and len(actor_pids(cluster, IN_TRIAL)) == 2

            wait_for(two_scored_two_running, 120, "two trials scored and two running")
            closed_before = ledger_attempts(ledger)
            fault_at = time.time()
            kill_gcs(cluster) if fault == "gcs" else kill_raylet(cluster.head_node)
            code = driver.wait(50)  # Ray itself would end it only after 60 s
            exited_s = time.time() - fault_at
            reader.join(5)
        finally:
            driver.kill()
    # The dead cluster is gone (every raylet and its slot workers killed); the rows stay.
    stopped = [(at, line) for at, line in lines if LINE.match(line)]
    assert code == HEAD_LOST_EXIT and len(stopped) == 1, (code, lines)
    at, line = stopped[0]
    match = LINE.match(line)
    assert match["what"] == ("the head's GCS" if fault == "gcs" else "the head's raylet"), line
    others = [text for _, text in lines if text.strip() and text != line]
    assert not others, f"more than the one line on the driver's output: {others}"
    rows = read_trials(config.output.dir).to_pylist()
    # No row lost: every attempt the driver counted as written is on disk, and it is the two scored.
    assert int(match["written"]) == len(rows) == 2 and int(match["scored"]) == 2, (line, rows)
    assert sorted(r["trial_id"] for r in rows) == ["noop/f0/0", "noop/f1/0"]
    assert int(match["running"]) == 2, line
    print(f"\nhead {fault} SIGKILL: the driver's line {at - fault_at:.2f} s and its exit {exited_s:.2f} s after the "
          f"kill (status {code}); rows before the resume 2 (2 scored)\n  {line}")
    if fault != "gcs":
        return

    # The two attempts that run again need not wait 40 s: the restarted cluster's workers read
    # the script anew (the same file, so `env` is unchanged) and the ledger goes on.
    assert sleep_env(tmp_path, {f"noop/f{i}/0": 0.5 for i in range(4)}) == (env, ledger)
    with ray_cluster(head, {"num_cpus": 4}, env=env, connect=False) as again_cluster:
        assert again_cluster.address == address  # the same address: literally the same command
        again = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=150)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "2 attempt(s) run, 2 already scored" in again.stdout, again.stdout
    rows = read_trials(config.output.dir).to_pylist()
    by_trial = assert_exactly_once(rows, trial_ids)
    assert len(rows) == 4 and all(len(a) == 1 for a in by_trial.values())  # the attempts in flight left no row
    closed = ledger_attempts(ledger)
    assert closed_before == {"noop/f0/0": [1], "noop/f1/0": [1]}
    assert closed == {**closed_before, "noop/f2/0": [1], "noop/f3/0": [1]}, closed  # nothing scored ran twice
    print("after the resume: rows 4 (4 scored, attempt 1 each)")
