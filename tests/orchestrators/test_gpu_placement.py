"""F11: a trial needing more GPUs than any node has never hangs the sweep.

A real multi-node Ray cluster on this machine (two raylets, one fake GPU each); the local
sandbox (fake GPUs cannot be handed to Docker here). The 2-GPU trial is capped to the largest
node, runs, and records C4 as insufficient_hardware; the other trials finish.
"""

from __future__ import annotations

import pytest

from reb_ray.models.sweep import SweepConfig
from reb_ray.results.read import read_trials
from reb_ray.testing.ray_cluster import ray_cluster
from reb_ray.testing.suite import write_task

#: The stages of a task that needs two GPUs: C1 must really hide the GPUs (F08), C3 sees one.
STAGES = {"cpu": 'command = "test -z \\"$CUDA_VISIBLE_DEVICES\\" && python main.py"',
          "single_gpu": 'command = "test \\"$CUDA_VISIBLE_DEVICES\\" = 0 && python main.py"',
          "multi_gpu": 'command = "python -c \'print(1)\'"\nlauncher = "python"\nranks = 2\ntimeout_s = 30'}


@pytest.fixture
def two_single_gpu_nodes():
    with ray_cluster({"num_cpus": 1, "num_gpus": 1}, {"num_cpus": 1, "num_gpus": 1}) as cluster:
        yield cluster


def test_two_gpu_trial_on_one_gpu_nodes_is_insufficient_hardware(tmp_path, two_single_gpu_nodes):
    from reb_ray.sweep.run import run_sweep

    for task_id in ("needs-two-a", "needs-two-b", "needs-two-c"):
        # a stage passes only when repository code ran
        write_task(tmp_path / "suites", "gpus", task_id, category="3_single_gpu+multi_gpu", **STAGES,
                   files={"main.py": "print('ok')\n"})
    config = SweepConfig(output=tmp_path / "runs", suite="gpus", tasks_root=tmp_path / "suites", agents=["noop"],
                         sandbox="local", max_concurrent=3)
    result = run_sweep(config, show_progress=False)
    rows = read_trials(config.output.dir).to_pylist()
    assert result.attempts == 3 and len(rows) == 3
    for row in rows:
        assert row["status"] == "scored" and row["gpus_assigned"] == 1
        assert row["c1_status"] == "success"  # no GPU visible although one is assigned
        assert row["c3_status"] == "success"  # exactly one GPU visible, numbered 0
        assert (row["c4_status"], row["c4_failure_category"]) == ("failure", "insufficient_hardware")
