"""A cluster of unequal GPU nodes on a real multi-raylet Ray cluster, with the sleeping sandbox.

Two raylets: one with one fake GPU (id 10), one with two (ids 20, 21). With and without
agent-phase GPU sharing, a 2-GPU trial runs on the 2-GPU node only (both its GPUs from that
node), and the 1-GPU trials run on both nodes: a sharing sweep no longer leaves the smaller node
to CPU trials. The sleeping sandbox's ledger records the GPU ids each phase really had.
"""

from __future__ import annotations

import json

import pytest

from reb_ray.models.sweep import SweepConfig
from reb_ray.results.read import read_trials
from tests.orchestrators.test_slot_workers import write_suite
from reb_ray.testing.ray_cluster import ray_cluster

SMALL, LARGE = {"10"}, {"20", "21"}


@pytest.fixture
def mixed_nodes(tmp_path, monkeypatch):
    script, ledger = tmp_path / "script.json", tmp_path / "ledger.jsonl"
    monkeypatch.setenv("REB_RAY_SLEEP_SCRIPT", str(script))  # raylets, and so slot workers, inherit it
    with ray_cluster({"num_cpus": 2, "num_gpus": 1, "env_vars": {"CUDA_VISIBLE_DEVICES": "10"}},
                     {"num_cpus": 3, "num_gpus": 2, "env_vars": {"CUDA_VISIBLE_DEVICES": "20,21"}}):
        yield script, ledger


def _run(tmp_path, script, ledger, share: bool) -> list[dict]:
    from reb_ray.sweep import run_sweep

    name = "shared" if share else "slots"
    path = ledger.with_name(f"{name}.jsonl")
    script.write_text(json.dumps({"default": {"agent_s": 0.8, "probe_s": 0.4}, "ledger": str(path)}))
    config = SweepConfig(output=tmp_path / name, suite="slots", tasks_root=tmp_path / "suites", agents=["noop"],
                         trials=1, sandbox="sleep", share_gpus_in_agent_phase=share, sweep_id=name)
    result = run_sweep(config, show_progress=False)
    rows = read_trials(config.output.dir).to_pylist()
    assert result.attempts == 7 and all(r["status"] == "scored" for r in rows), rows
    return [json.loads(line) for line in path.read_text().splitlines()]


def _gpus(entry: dict, share: bool) -> set[str]:
    return set(entry["probe_gpus"] if share else entry["gpus"])


def test_two_gpu_trials_on_the_two_gpu_node_one_gpu_trials_on_both(tmp_path, mixed_nodes):
    script, ledger = mixed_nodes
    write_suite(tmp_path / "suites", {1: 5, 2: 2})
    for share in (False, True):
        entries = _run(tmp_path, script, ledger, share)
        assert len(entries) == 7
        for e in entries:
            if e["trial_id"].startswith("noop/g2-"):
                assert _gpus(e, share) == LARGE, (share, e)
        nodes = {"small" if _gpus(e, share) <= SMALL else "large" for e in entries if e["trial_id"].startswith("noop/g1-")}
        assert nodes == {"small", "large"}, (share, entries)
        for e in entries:  # one node's GPUs, the trial's count of them
            assert len(_gpus(e, share)) == int(e["trial_id"].split("/")[1][1]) and (
                _gpus(e, share) <= SMALL or _gpus(e, share) <= LARGE), (share, e)
        spans = [((e["probe_sleep"] if share else [e["agent_sleep"][0], e["probe_sleep"][1]]), _gpus(e, share))
                 for e in entries]
        for i, (a, ga) in enumerate(spans):  # no GPU held by two trials at once
            for b, gb in spans[i + 1:]:
                assert not (ga & gb and a[0] < b[1] and b[0] < a[1]), (share, a, b)
