"""Agent-phase GPU sharing on a real Ray cluster (issue 12, item 5), with the sleeping sandbox.

One raylet with two fake GPUs (ids 10, 11) and more CPUs than GPUs: agent phases run on sharing
slots that hold no GPU, so more of them run at once than the node has GPUs, while each probe
phase holds its GPUs exclusively through the node's lease actor. The sleeping sandbox's ledger
records the wall-clock interval of each phase and the GPU ids the sandbox had during it.
"""

from __future__ import annotations

import json

import pytest

from reb_ray.models.sweep import SweepConfig
from reb_ray.results.read import read_trials
from tests.orchestrators.test_slot_workers import write_suite

NODE = {"10", "11"}


@pytest.fixture(scope="module")
def one_gpu_node(tmp_path_factory):
    """The module's one-node cluster, shared by its tests (each runs its own sweep and kills
    nothing). Its raylet, and so its slot workers, read the sleeping sandbox's script at one
    path, which each test writes anew (`ledger`): a sweep's slot workers are new processes and
    read it then. Yields (cluster, script path)."""
    from reb_ray.testing.ray_cluster import ray_cluster

    script = tmp_path_factory.mktemp("gpu-sharing") / "script.json"
    with ray_cluster({"num_cpus": 8, "num_gpus": 2, "env_vars": {"CUDA_VISIBLE_DEVICES": "10,11"}},
                     env={"REB_RAY_SLEEP_SCRIPT": str(script)}) as cluster:
        yield cluster, script


@pytest.fixture
def ledger(tmp_path, one_gpu_node):
    """(the script to write, this test's own ledger)."""
    return one_gpu_node[1], tmp_path / "ledger.jsonl"


def _entries(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _overlap(a: list[float], b: list[float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def test_agent_phases_overlap_while_probe_phases_never_share_a_gpu(tmp_path, one_gpu_node, ledger):
    from reb_ray.sweep.run import run_sweep

    script, path = ledger
    script.write_text(json.dumps({"default": {"agent_s": 2.0, "probe_s": 0.4}, "ledger": str(path)}))
    write_suite(tmp_path / "suites", {0: 1, 1: 3, 2: 3})
    config = SweepConfig(output=tmp_path / "runs", suite="slots", tasks_root=tmp_path / "suites", agents=["noop"],
                         trials=1, sandbox="sleep", share_gpus_in_agent_phase=True)
    result = run_sweep(config, show_progress=False)
    rows = {r["trial_id"]: r for r in read_trials(config.output.dir).to_pylist()}
    assert result.attempts == 7 and all(r["status"] == "scored" for r in rows.values())
    assert all(r["gpu_sharing"] is True for r in rows.values())
    entries = _entries(path)
    gpu_entries = [e for e in entries if e["trial_id"].split("/")[1][1] != "0"]
    for e in entries:
        need = int(e["trial_id"].split("/")[1][1])
        # The agent saw as many of the node's GPUs as its probes got; the probes got them exclusively.
        assert len(e["agent_gpus"]) == need and len(e["probe_gpus"]) == need and set(e["probe_gpus"]) <= NODE, e
        assert e["probe_sleep"][0] >= e["agent_sleep"][1]
        row = rows[e["trial_id"]]
        assert row["gpus_assigned"] == need
        assert (row["probe_gpu_wait_s"] is not None) == (need > 0)
    # More agent phases ran at once than the node has GPUs (six GPU trials, two GPUs).
    most = max(sum(_overlap(e["agent_sleep"], f["agent_sleep"]) for f in gpu_entries) for e in gpu_entries)
    assert most >= 3, [e["agent_sleep"] for e in gpu_entries]
    # Two probe phases that ran at the same time never had a GPU in common.
    for i, a in enumerate(gpu_entries):
        for b in gpu_entries[i + 1:]:
            if _overlap(a["probe_sleep"], b["probe_sleep"]):
                assert not set(a["probe_gpus"]) & set(b["probe_gpus"]), (a, b)


def test_a_two_gpu_probe_phase_is_not_starved_by_one_gpu_probes(tmp_path, one_gpu_node, ledger):
    from reb_ray.sweep.run import run_sweep

    script, path = ledger
    # Seven 1-GPU trials whose probes end 0.25 s apart, so one GPU is nearly always free for a
    # moment; a greedy lease would give it to each next 1-GPU probe and the 2-GPU one would wait
    # for all of them.
    trials = {f"noop/g1-{i}/0": {"agent_s": 1.0 + 0.25 * i, "probe_s": 1.0} for i in range(7)}
    trials["noop/g2-0/0"] = {"agent_s": 1.6, "probe_s": 0.5}
    script.write_text(json.dumps({"trials": trials, "ledger": str(path)}))
    write_suite(tmp_path / "suites", {1: 7, 2: 1})
    config = SweepConfig(output=tmp_path / "runs", suite="slots", tasks_root=tmp_path / "suites", agents=["noop"],
                         trials=1, sandbox="sleep", share_gpus_in_agent_phase=True)
    result = run_sweep(config, show_progress=False)
    assert result.attempts == 8 and result.infra_errors == 0
    entries = {e["trial_id"]: e for e in _entries(path)}
    big = entries.pop("noop/g2-0/0")
    assert sorted(big["probe_gpus"]) == ["10", "11"]
    asked = big["agent_sleep"][1]  # its lease was requested right after its agent phase
    later = [e for e in entries.values() if e["agent_sleep"][1] > asked + 0.1]
    assert later, "no 1-GPU probe asked after the 2-GPU one: the scenario did not happen"
    for e in later:  # every 1-GPU probe that asked later started after it
        assert e["probe_sleep"][0] >= big["probe_sleep"][1] - 0.05, (big, e)
