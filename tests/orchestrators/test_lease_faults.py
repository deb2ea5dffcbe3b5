"""A GPU lease actor killed in the middle of a GPU-sharing sweep, on a real Ray cluster.

One raylet with two fake GPUs (ids 10, 11) and eight CPUs, the sleeping sandbox: six GPU trials'
agent phases run at once, so when the node's lease actor is SIGKILLed two probe phases hold
GPUs and the others wait for them. Ray restarts the actor; it rebuilds its book from its file
and the workers still running, and the calls it was serving are retried. Every trial is then
scored once (no attempt lost to the fault), and no GPU was ever held by two probe phases at once.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import tempfile
import threading
import time

import pytest

from reb_ray.models.sweep import SweepConfig
from reb_ray.results.read import read_trials
from tests.orchestrators.test_slot_workers import write_suite
from reb_ray.testing.ray_cluster import actor_pids, ray_cluster

pytestmark = pytest.mark.integration


def _kill_lease_actor_while_probes_run(cluster, seen: dict) -> None:
    """SIGKILL the lease actor 0.5 s after its book (the file it writes on every change) first
    shows a probe phase holding GPUs while another waits (probe phases take 2.5 s)."""
    started = time.time()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for path in glob.glob(os.path.join(tempfile.gettempdir(), "reb-ray-lease-*.json")):
            try:
                if os.path.getmtime(path) < started:
                    continue
                with open(path) as f:
                    book = json.load(f)
            except (OSError, ValueError):
                continue
            if book["held"] and book["waiting"]:
                time.sleep(0.5)
                pids = list(actor_pids(cluster, "ray::NodeGpuLease"))
                if pids:
                    seen["at"] = time.time()
                    seen["pid"] = pids[0]
                    os.kill(pids[0], signal.SIGKILL)
                return
        time.sleep(0.05)


def test_a_killed_lease_actor_heals_every_trial_scored_once_no_gpu_held_twice(tmp_path, monkeypatch):
    from reb_ray.sweep import run_sweep

    script, ledger = tmp_path / "script.json", tmp_path / "ledger.jsonl"
    script.write_text(json.dumps({"default": {"agent_s": 1.0, "probe_s": 2.5}, "ledger": str(ledger)}))
    monkeypatch.setenv("REB_RAY_SLEEP_SCRIPT", str(script))
    write_suite(tmp_path / "suites", {1: 4, 2: 2})
    config = SweepConfig(output=tmp_path / "runs", suite="slots", tasks_root=tmp_path / "suites", agents=["noop"],
                         trials=1, sandbox="sleep", share_gpus_in_agent_phase=True)
    seen: dict = {}
    with ray_cluster({"num_cpus": 8, "num_gpus": 2, "env_vars": {"CUDA_VISIBLE_DEVICES": "10,11"}}) as cluster:
        killer = threading.Thread(target=_kill_lease_actor_while_probes_run, args=(cluster, seen), daemon=True)
        killer.start()
        result = run_sweep(config, show_progress=False)
        killer.join(10)
    assert seen.get("pid"), "the lease actor was never found"
    rows = read_trials(config.output.dir).to_pylist()
    assert sorted(r["trial_id"] for r in rows) == sorted({r["trial_id"] for r in rows}) and len(rows) == 6
    assert all(r["status"] == "scored" and r["attempt"] == 1 for r in rows), rows
    assert result.attempts == 6 and result.infra_errors == 0
    entries = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert len(entries) == 6
    spans = [(e["probe_sleep"], set(e["probe_gpus"])) for e in entries]
    # The fault really struck mid-sweep: a probe phase held GPUs across it, and another waited.
    assert any(a[0] < seen["at"] < a[1] for a, _ in spans), (seen, spans)
    assert any(a[0] > seen["at"] for a, _ in spans), (seen, spans)
    for i, (a, ga) in enumerate(spans):
        for b, gb in spans[i + 1:]:
            assert not (ga & gb and a[0] < b[1] and b[0] < a[1]), (a, ga, b, gb)
