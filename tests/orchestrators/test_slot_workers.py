"""Long-lived slot workers on a real multi-raylet Ray cluster (issue 12, item 1; F19).

Two raylets on this machine (reb_ray/testing/ray_cluster.py), each with two fake GPUs whose ids differ per
node (the raylet's CUDA_VISIBLE_DEVICES: 10,11 and 20,21), and the sleeping sandbox, whose
ledger records the GPU ids and the worker pid each trial's sandbox really got. The tests share
the cluster: each runs its own sweep, kills at most its own slot workers (never a node), and
writes its own script and ledger (a sweep's slot workers are new processes and read the
script anew).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest

from reb_ray.models.sweep import SweepConfig
from reb_ray.results.read import read_trials
from reb_ray.testing.ray_cluster import actor_pids, ray_cluster
from reb_ray.testing.suite import MULTI, OFF, write_task

NODE_GPUS = ({"10", "11"}, {"20", "21"})



def write_suite(root, counts: dict[int | str, int]) -> None:
    """`counts`: {GPUs needed (0, 1, 2): how many tasks}; task ids say it: g2-0, g1-3, ... The
    key "c2" makes tasks whose only GPU stage is C2 (CUDA alignment), ids g1c2-0, ...: they need
    one GPU too. Tasks that need none opt out of C2."""
    for key, n in counts.items():
        gpus = 1 if key == "c2" else int(key)
        for i in range(n):
            name = f"g1c2-{i}" if key == "c2" else f"g{gpus}-{i}"
            write_task(root, "slots", name, category=f"{gpus}_gpu", single_gpu='command = "true"' if key in (1, 2) else OFF,
                       multi_gpu=MULTI if key == 2 else OFF, cuda="applicable = true" if gpus else OFF)


@pytest.fixture(scope="module")
def two_gpu_nodes(tmp_path_factory):
    """The module's cluster; its raylets, and so its slot workers, read the sleeping sandbox's
    script at one path (REB_RAY_SLEEP_SCRIPT), which `sleep_script` writes for each test.
    Yields (cluster, script path)."""
    script = tmp_path_factory.mktemp("slot-workers") / "script.json"
    script.write_text(json.dumps({"default": {"agent_s": 1.0, "probe_s": 0.2}}))
    with ray_cluster({"num_cpus": 3, "num_gpus": 2, "env_vars": {"CUDA_VISIBLE_DEVICES": "10,11"}},
                     {"num_cpus": 3, "num_gpus": 2, "env_vars": {"CUDA_VISIBLE_DEVICES": "20,21"}},
                     env={"REB_RAY_SLEEP_SCRIPT": str(script)}) as cluster:
        yield cluster, script


@pytest.fixture
def sleep_script(tmp_path, two_gpu_nodes):
    """The sleeping sandbox's script (every trial 1 s of agent, 0.2 s of probes) with this test's
    own ledger; (script, ledger)."""
    _, script = two_gpu_nodes
    ledger = tmp_path / "ledger.jsonl"
    script.write_text(json.dumps({"default": {"agent_s": 1.0, "probe_s": 0.2}, "ledger": str(ledger)}))
    return script, ledger


def _ledger(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_many_trials_on_few_slot_workers_and_two_gpu_trials_on_one_nodes_gpus(tmp_path, two_gpu_nodes, sleep_script):
    from reb_ray.sweep.run import run_sweep

    write_suite(tmp_path / "suites", {0: 2, 1: 2, 2: 3, "c2": 1})
    config = SweepConfig(output=tmp_path / "runs", suite="slots", tasks_root=tmp_path / "suites", agents=["noop"],
                         trials=2, sandbox="sleep")
    result = run_sweep(config, show_progress=False)
    rows = read_trials(config.output.dir).to_pylist()
    assert result.attempts == 16 and all(r["status"] == "scored" for r in rows)
    # A task whose only GPU stage is C2 holds a GPU like any single-GPU task.
    assert {r["gpus_assigned"] for r in rows if r["task_id"].startswith("g1c2-")} == {1}
    # 2 GPU slots + 1 CPU slot per node: six workers, never one per trial.
    assert result.slot_workers == 6
    ledger = _ledger(sleep_script[1])
    assert len(ledger) == 16 and len({e["pid"] for e in ledger}) <= 6
    for entry in ledger:
        gpus = set(entry["gpus"])
        needed = int(entry["trial_id"].split("/")[1][1])
        assert len(gpus) == needed, entry
        if needed:
            assert any(gpus <= node for node in NODE_GPUS), entry  # every GPU from one node
    # Two trials at once never shared a GPU.
    spans = [(e["agent_sleep"][0], e["probe_sleep"][1], set(e["gpus"])) for e in ledger]
    for i, (s1, e1, g1) in enumerate(spans):
        for s2, e2, g2 in spans[i + 1:]:
            assert not (g1 & g2 and s1 < e2 and s2 < e1), (g1, g2)


def _kill_busy_slot_worker(cluster, seen: dict) -> None:
    """SIGKILL the first of this cluster's slot workers seen running a trial (its process title
    names the method)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for pid in actor_pids(cluster, "ray::SlotWorker.run"):
            seen["pid"] = pid
            os.kill(pid, signal.SIGKILL)
            return
        time.sleep(0.2)


def test_a_killed_slot_worker_is_replaced_and_its_attempt_retried(tmp_path, two_gpu_nodes, sleep_script):
    from reb_ray.sweep.run import run_sweep

    sleep_script[0].write_text(json.dumps({"default": {"agent_s": 4.0, "probe_s": 0.1}, "ledger": str(sleep_script[1])}))
    write_suite(tmp_path / "suites", {1: 1})
    config = SweepConfig(output=tmp_path / "runs", suite="slots", tasks_root=tmp_path / "suites", agents=["noop"],
                         trials=1, sandbox="sleep")
    seen: dict = {}
    killer = threading.Thread(target=_kill_busy_slot_worker, args=(two_gpu_nodes[0], seen), daemon=True)
    killer.start()
    result = run_sweep(config, show_progress=False)
    killer.join(5)
    assert seen.get("pid")
    rows = sorted(read_trials(config.output.dir).to_pylist(), key=lambda r: r["attempt"])
    assert [(r["attempt"], r["status"]) for r in rows] == [(1, "infra_error"), (2, "scored")]
    assert (rows[0]["failure_owner"], rows[0]["failure_category"]) == ("infra", "infra_node")
    assert result.slot_workers == 3  # two GPU slots on the first node, then the dead one's replacement
    (entry,) = _ledger(sleep_script[1])  # only the retry closed its sandbox
    assert entry["attempt"] == 2 and entry["pid"] != seen["pid"]


def test_slots_sharing_one_worker_per_node_get_one_gpu_each_and_die_together(tmp_path, two_gpu_nodes, sleep_script):
    """All of a node's slots in one worker process (threads): each GPU slot still gets its own
    GPU, and when that process is killed mid-sweep every attempt it ran is retried elsewhere or
    on its replacement, each trial scored exactly once."""
    from reb_ray.sweep.run import run_sweep

    sleep_script[0].write_text(json.dumps({"default": {"agent_s": 2.0, "probe_s": 0.2}, "ledger": str(sleep_script[1])}))
    write_suite(tmp_path / "suites", {0: 1, 1: 2, 2: 1})
    config = SweepConfig(output=tmp_path / "runs", suite="slots", tasks_root=tmp_path / "suites", agents=["noop"],
                         trials=2, sandbox="sleep")
    seen: dict = {}
    killer = threading.Thread(target=_kill_busy_slot_worker, args=(two_gpu_nodes[0], seen), daemon=True)
    killer.start()
    result = run_sweep(config, show_progress=False, slots_per_worker=None)
    killer.join(5)
    assert seen.get("pid")
    rows = read_trials(config.output.dir).to_pylist()
    scored = [r["trial_id"] for r in rows if r["status"] == "scored"]
    assert sorted(scored) == sorted(set(scored)) and len(scored) == 8  # every trial once
    failed = [r for r in rows if r["status"] != "scored"]
    assert failed and {(r["failure_owner"], r["failure_category"]) for r in failed} == {("infra", "infra_node")}
    # Two processes of three slots each (2 GPU + 1 CPU), and the killed one's replacement.
    assert (result.slot_processes, result.slot_workers) == (3, 9)
    ledger = _ledger(sleep_script[1])
    assert seen["pid"] not in {e["pid"] for e in ledger if e["attempt"] > 1}
    for entry in ledger:
        needed = int(entry["trial_id"].split("/")[1][1])
        assert len(set(entry["gpus"])) == needed, entry
        if needed:
            assert any(set(entry["gpus"]) <= node for node in NODE_GPUS), entry
    spans = [(e["agent_sleep"][0], e["probe_sleep"][1], set(e["gpus"])) for e in ledger]
    for i, (s1, e1, g1) in enumerate(spans):
        for s2, e2, g2 in spans[i + 1:]:
            assert not (g1 & g2 and s1 < e2 and s2 < e1), (g1, g2)


def test_f19_a_trial_no_node_can_hold_is_recorded_at_once_and_the_sweep_ends(tmp_path, two_gpu_nodes):
    from reb_ray.sweep.run import run_sweep

    write_suite(tmp_path / "suites", {0: 1, 2: 1})
    config = SweepConfig(output=tmp_path / "runs", suite="slots", tasks_root=tmp_path / "suites", agents=["noop"],
                         sandbox="sleep", cpus_per_trial=8)
    box: dict = {}
    runner = threading.Thread(target=lambda: box.update(result=run_sweep(config, show_progress=False)), daemon=True)
    started = time.monotonic()
    runner.start()
    runner.join(120)  # Ray would keep an 8-CPU request pending forever
    assert not runner.is_alive(), "the sweep hung on a request no node can hold"
    assert time.monotonic() - started < 60
    rows = read_trials(config.output.dir).to_pylist()
    assert len(rows) == 2 and box["result"].attempts == 2
    for row in rows:
        assert (row["status"], row["failure_owner"], row["failure_category"]) == ("infra_error", "hardware",
                                                                                   "insufficient_hardware")
        assert "needs 8 CPU(s) per trial" in row["failure_reason"] and "has 3" in row["failure_reason"]
