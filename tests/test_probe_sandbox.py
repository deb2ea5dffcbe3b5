"""The phase split of a GPU-sharing sweep on real Docker (issue 12, item 5): the agent's container
committed to a per-attempt image, the probes in new containers from it, C1 with no GPU device,
the image removed on every path, and the same scores as without sharing (the shared demo sweep's
heuristic trials, tests/helpers/shared_runs.py, with the same settings).

This machine's Docker has no NVIDIA runtime, so no container here can hold a GPU: the probe
container is made with the (empty) leased GPUs, and its device request for real ids is checked
on the config it would be created with."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import docker
import pytest

from reb_ray.errors import InfraError
from reb_ray.trial.gpu_lease import StaticLease
from reb_ray.models.sweep import SweepConfig, TrialSpec
from reb_ray.suite.load import load_suite
from reb_ray.trial.phase_split import PhaseSplit
from reb_ray.probing.toolbox import TOOLBOX_SANDBOX_PATH
from reb_ray.sandbox import SandboxConfig
from reb_ray.sandbox.docker.docker_sandbox import DockerSandbox, container_create_kwargs
from reb_ray.sandbox.ownership import ATTEMPT_IMAGE, SWEEP
from reb_ray.trial.record import TrialRecorder

DEMO = {t.id: t for t in load_suite("demo")}


def _leftovers(client: docker.DockerClient, sweep_id: str) -> tuple[list, list]:
    """Containers and per-attempt images the sweep left on this daemon."""
    containers = client.containers.list(all=True, filters={"label": f"{SWEEP}={sweep_id}"})
    images = client.images.list(filters={"label": [f"{SWEEP}={sweep_id}", f"{ATTEMPT_IMAGE}=true"]})
    return containers, images


def test_the_probe_containers_hold_the_agents_files_and_c1s_has_no_gpu_device(docker_client, sandbox_image):
    spec = TrialSpec(sweep_id="split-unit", agent="noop", task=DEMO["numpy-trainer"], trial_index=0,
                     config=SweepConfig(share_gpus_in_agent_phase=True))
    rec = TrialRecorder(spec)
    split = PhaseSplit(rec, StaticLease(agent_gpus=[], gpus=[]), spec.task)
    agent_box = DockerSandbox(split.agent_config(SandboxConfig(image=sandbox_image, sweep_id="split-unit",
                                                               trial_id=spec.trial_id, attempt=1)), docker_client)
    try:
        assert agent_box.config.shared_gpus
        agent_box.exec("mkdir -p /opt/env/bin && echo built > /opt/env/bin/marker && pip --version > /opt/env/pip",
                       timeout=60)
        probe_box, gpus = split.probe_sandbox(agent_box)
        assert gpus == [] and probe_box.id != agent_box.id
        with pytest.raises(docker.errors.NotFound):  # the agent's container is gone once committed
            docker_client.api.inspect_container(agent_box.id)
        assert probe_box.read_bytes("/opt/env/bin/marker") == b"built\n"
        assert rec.row["probe_image_commit_s"] > 0 and rec.row["probe_image_bytes"] > 0
        assert rec.row["probe_gpu_wait_s"] is not None
        with split.c1_sandbox() as c1_box:
            host = docker_client.api.inspect_container(c1_box.id)["HostConfig"]
            assert not host.get("DeviceRequests")  # no GPU device at all, whatever CUDA_VISIBLE_DEVICES says
            assert c1_box.read_bytes("/opt/env/bin/marker") == b"built\n"
            assert c1_box.exec(f"test -x {TOOLBOX_SANDBOX_PATH}/node", timeout=60).ok
        # With GPUs leased, the probe container asks for exactly those; C1's for none.
        assert container_create_kwargs(split.box_config(["3", "5"]), "x")["device_requests"][0].device_ids == ["3", "5"]
        assert "device_requests" not in container_create_kwargs(split.box_config([]), "x")
        assert docker_client.images.get(split.image).labels[ATTEMPT_IMAGE] == "true"
    finally:
        agent_box.close()
        assert split.close() is None
    containers, images = _leftovers(docker_client, "split-unit")
    assert containers == [] and images == []


def _run(base: SweepConfig, task: str, sweep_id: str, image: str, lease) -> dict:
    from reb_ray.trial.run import run_trial

    # The demo sweep's settings with the agent phase's GPUs shared: only the sharing differs
    config = base.updated(share_gpus_in_agent_phase=True)
    spec = TrialSpec(sweep_id=sweep_id, agent="heuristic", task=DEMO[task], trial_index=0, config=config, image=image)
    return run_trial(spec, [], gpu_lease=lease).trial


SCORES = ("status", "failure_owner", "failure_category", "report_status", "c0_status", "c0_resolved", "c0_missing",
          "c1_status", "c1_exit_code", "c2_status", "c3_status", "c4_status", "c5_path", "c5_version", "c5_capability",
          "env_size_status", "repo_modified", "gpus_assigned")
SHARED_TASKS = ("numpy-trainer", "pyproject-extra")


class LostLease(StaticLease):
    """A lease whose node actor is gone (the node left): the probe phase cannot get its GPUs."""

    def acquire(self) -> list[str]:
        raise InfraError("infra_node", "the node's GPU lease is gone: actor died")


@pytest.fixture(scope="module")
def shared_runs(demo_sweep, sandbox_image, tmp_path_factory):
    """Heuristic trials with the agent phase's GPUs shared, with the demo sweep's settings
    (tests/helpers/shared_runs.py), whose own heuristic trials are the default ones they are
    compared with: one per task of SHARED_TASKS, and one on numpy-trainer whose lease is lost after
    the commit. Two at a time, as a sweep runs trials on this machine. {name: (row, lease)}."""
    runs = {task: (f"shared-{task}", task, StaticLease(agent_gpus=[], gpus=[])) for task in SHARED_TASKS}
    runs["lost"] = ("shared-lost", "numpy-trainer", LostLease(agent_gpus=[], gpus=[]))
    base = demo_sweep.config.updated(output={"dir": tmp_path_factory.mktemp("shared-gpus") / "runs"})  # never the shared output
    with ThreadPoolExecutor(2) as pool:
        rows = pool.map(lambda run: _run(base, run[1], run[0], sandbox_image, run[2]), runs.values())
        return {name: (row, run[2]) for (name, run), row in zip(runs.items(), rows)}


@pytest.mark.parametrize("task", SHARED_TASKS)
def test_a_shared_trial_scores_as_the_default_one_and_leaves_no_image(docker_client, demo_sweep, shared_runs, task):
    plain = demo_sweep.row("heuristic", task)
    shared, lease = shared_runs[task]
    assert plain["status"] == "scored" and plain["c1_status"] == "success", plain  # the agent installed what C1 needs
    assert {k: shared.get(k) for k in SCORES} == {k: plain.get(k) for k in SCORES}
    assert (plain["gpu_sharing"], shared["gpu_sharing"]) == (False, True)
    assert plain.get("probe_image_commit_s") is None and shared["probe_image_commit_s"] > 0
    assert shared["probe_image_bytes"] > 0 and lease.acquired == 1 and lease.released >= 1
    assert _leftovers(docker_client, f"shared-{task}") == ([], [])


def test_a_failure_after_the_commit_removes_the_image_and_every_container(docker_client, shared_runs):
    row, _ = shared_runs["lost"]
    assert (row["status"], row["failure_owner"], row["failure_category"]) == ("infra_error", "infra", "infra_node")
    assert row["probe_image_commit_s"] > 0  # it failed after the commit
    assert _leftovers(docker_client, "shared-lost") == ([], [])
