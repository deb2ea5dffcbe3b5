"""Issue 9 item 9: on a node whose Docker cannot give containers GPUs, GPU trials are not
`infra_sandbox` retried forever: the node's check runs before any trial, the trial runs its
CPU stage in a container without GPUs, and its GPU stages are `insufficient_hardware`.

Real Ray with two fake GPUs (`ray.init(num_gpus=2)`: this machine has none), and this machine's
real Docker, which has no NVIDIA runtime: a container with a GPU device request cannot start.
"""

from __future__ import annotations

import uuid

import pytest

from reb_ray.models.sweep import SweepConfig
from reb_ray.results.read import read_stages, read_trials
from reb_ray.sandbox.ownership import SWEEP
from reb_ray.testing.suite import write_task

STAGES = {"cpu": 'command = "test -z \\"$CUDA_VISIBLE_DEVICES\\" && python main.py"',
          "single_gpu": 'command = "python -c \'print(1)\'"',
          "multi_gpu": 'command = "python -c \'print(1)\'"\nlauncher = "python"\nranks = 2\ntimeout_s = 30'}


@pytest.fixture
def ray_with_two_fake_gpus():
    import ray

    ray.init(address="local", num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


def test_gpu_trial_on_docker_without_nvidia_runtime_is_insufficient_hardware(tmp_path, docker_client, sandbox_image,
                                                                             ray_with_two_fake_gpus):
    from reb_ray.sweep.run import run_sweep

    # a stage passes only when repository code ran
    write_task(tmp_path / "suites", "gpus", "gpu-task", category="3_single_gpu+multi_gpu", **STAGES,
               files={"main.py": "print('cpu-ok')\n"})
    sweep_id = f"test-nogpu-{uuid.uuid4().hex[:8]}"
    config = SweepConfig(sweep_id=sweep_id, output=tmp_path / "runs", suite="gpus", tasks_root=tmp_path / "suites",
                         agents=["noop"], wheelhouses=[], pip_cache=False)
    result = run_sweep(config, show_progress=False)
    (row,) = read_trials(config.output.dir).to_pylist()  # one attempt: nothing was retried
    assert result.attempts == 1 and row["status"] == "scored", row["failure_reason"]
    assert row["gpus_assigned"] == 0 and row["c1_status"] == "success"  # the CPU stage ran, in a container without GPUs
    assert (row["c3_status"], row["c3_failure_category"]) == ("failure", "insufficient_hardware")
    assert (row["c4_status"], row["c4_failure_category"]) == ("failure", "insufficient_hardware")
    assert row["c2_failure_category"] != "infra_sandbox"
    stages = {s["stage"]: s for s in read_stages(config.output.dir).to_pylist()}
    for name in ("c3", "c4"):
        assert "could not select device driver" in stages[name]["reason"], stages[name]["reason"]
    assert docker_client.containers.list(all=True, filters={"label": f"{SWEEP}={sweep_id}"}) == []
    assert docker_client.containers.list(all=True, filters={"label": f"{SWEEP}=gpu-check"}) == []  # the probe is gone too
