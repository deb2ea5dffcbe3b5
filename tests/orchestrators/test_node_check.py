"""Every node checked at sweep start and when it joins; per-node slot cap; live cluster resources
(issue 13, items 3 and 4), on a real multi-raylet Ray cluster on this machine.

The cluster fixture (`raylets`) starts reb_ray/testing/ray_cluster.py's raylets with their own CPUs,
fake GPUs, custom resources and environment, and can add a `ray start --block` raylet
mid-sweep. Node failures are real: a raylet whose temporary directory (TMPDIR, where trials' workspaces go) is a 64 MiB tmpfs mounted here fails
the free-disk check of the sweep's `min_free_bytes`; a raylet whose DOCKER_HOST names a second
Docker daemon that lacks the image gets it shipped from the driver.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from reb_ray.models.sweep import SweepConfig
from reb_ray.results.read import read_trials
from tests.helpers.private_dockerd import PrivateDockerd
from reb_ray.testing.suite import OFF, write_task

ROOT = Path(__file__).resolve().parents[2]



def write_suite(root: Path, n: int, gpu: bool = False) -> None:
    for i in range(n):
        gpu_stage = 'command = "true"' if gpu else 'applicable = false\nskip_reason = "CPU task"'
        # A CPU task opts out of C2 too: C2 needs a GPU, so a task with it is a GPU trial.
        cuda = "applicable = true" if gpu else 'applicable = false\nskip_reason = "CPU task"'
        write_task(root, "nodes", f"t{i}", category="cpu", single_gpu=gpu_stage, multi_gpu=OFF, cuda=cuda)


@pytest.fixture
def sleep_script(tmp_path, monkeypatch):
    """Every trial 2 s of agent, 0.1 s of probes; the ledger records what each sandbox ran."""
    script, ledger = tmp_path / "script.json", tmp_path / "ledger.jsonl"
    script.write_text(json.dumps({"default": {"agent_s": 2.0, "probe_s": 0.1}, "ledger": str(ledger)}))
    monkeypatch.setenv("REB_RAY_SLEEP_SCRIPT", str(script))  # raylets, and so slot workers, inherit it
    return ledger


@pytest.fixture
def raylets(sleep_script):
    """A factory: `start(head={...}, nodes=[{...}, ...])` starts the cluster (each dict: num_cpus,
    num_gpus, resources, env_vars) and connects this driver. `start.join(delay_s, args, env)`
    starts one more raylet `delay_s` seconds later with `ray start --address ... --block ARGS`
    (a node joining mid-sweep, as an autoscaled worker does), stopped at teardown."""
    import contextlib
    import threading

    from reb_ray.testing.ray_cluster import ray_cluster

    box: dict = {"joined": []}
    stack = contextlib.ExitStack()

    def join(delay_s: float, args: list[str], env: dict | None = None) -> threading.Timer:
        ray_cli = str(Path(sys.executable).with_name("ray"))

        def go() -> None:
            box["joined"].append(subprocess.Popen(
                [ray_cli, "start", "--address", box["cluster"].address, "--block", "--disable-usage-stats", *args],
                env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

        timer = threading.Timer(delay_s, go)
        timer.start()
        return timer

    def start(head: dict, nodes: list[dict] = ()):
        box["cluster"] = stack.enter_context(ray_cluster(head, *nodes))  # reb_ray/testing/ray_cluster.py, connected
        return box["cluster"]

    start.join = join
    yield start
    for proc in box["joined"]:
        proc.terminate()
        proc.wait(60)
    stack.close()


def _ledger(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _max_overlap(ledger: list[dict]) -> int:
    """The most trials whose sleeps overlapped at one moment."""
    events = sorted([(e["agent_sleep"][0], 1) for e in ledger] + [(e["probe_sleep"][1], -1) for e in ledger])
    best = now = 0
    for _, step in events:
        now += step
        best = max(best, now)
    return best


@pytest.fixture(scope="class")
def nearly_full(tmp_path_factory):
    """A head of 2 CPUs and a node of 2 CPUs whose temporary directory (TMPDIR, where trials'
    workspaces go) is a 64 MiB tmpfs mounted here, shared by the tests that only run sweeps
    on it (none kills or adds a node). Every trial 2 s of agent, 0.1 s of probes. Connected;
    yields the tmpfs."""
    from reb_ray.testing.ray_cluster import ray_cluster

    where = tmp_path_factory.mktemp("nearly-full")
    mount = where / "small"
    mount.mkdir()
    script = where / "script.json"
    script.write_text(json.dumps({"default": {"agent_s": 2.0, "probe_s": 0.1}}))
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mount)], check=True)
    try:
        with ray_cluster({"num_cpus": 2}, {"num_cpus": 2, "env_vars": {"TMPDIR": str(mount)}},
                         env={"REB_RAY_SLEEP_SCRIPT": str(script)}):
            yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.integration
class TestOnAHeadAndANearlyFullNode:
    """Node checks and hardware refusals that only read the nodes: one cluster for all three."""

    def test_a_node_that_fails_its_check_gets_no_trials_and_is_named_once(self, tmp_path, nearly_full, capfd):
        from reb_ray.sweep.run import run_sweep, sweep_log

        small_tmp = nearly_full
        write_suite(tmp_path / "suites", 4)
        config = SweepConfig(output=tmp_path / "runs", suite="nodes", tasks_root=tmp_path / "suites", agents=["noop"],
                             sandbox="sleep", min_free_bytes=1024**3)
        result = run_sweep(config, show_progress=False)
        rows = read_trials(config.output.dir).to_pylist()
        assert result.attempts == 4 and all(r["status"] == "scored" for r in rows)
        assert result.slot_workers == 2  # only the good node's two CPU slots
        lines = [line for line in capfd.readouterr().err.splitlines() if "gets no trials" in line]
        assert len(lines) == 1 and f"free in {small_tmp}" in lines[0] and "trials need >= 1.1 GB" in lines[0], lines
        logged = sweep_log(config, result.sweep_id).read_text().splitlines()
        assert len(logged) == 1 and logged[0].endswith(lines[0])

    def test_no_node_passing_stops_the_sweep_with_one_line_and_no_rows(self, tmp_path, nearly_full):
        from reb_ray.orchestrators.ray_orchestrator import NoUsableNode
        from reb_ray.sweep.run import run_sweep

        write_suite(tmp_path / "suites", 2)
        config = SweepConfig(output=tmp_path / "runs", suite="nodes", tasks_root=tmp_path / "suites", agents=["noop"],
                             sandbox="sleep", min_free_bytes=1024**5, assets_dir=tmp_path / "nowhere")
        with pytest.raises(NoUsableNode) as err:
            run_sweep(config, show_progress=False)
        message = str(err.value)
        assert "\n" not in message and "no node of the cluster passed its check (2 failed;" in message
        assert f"assets {tmp_path / 'nowhere'}: no such directory on this node" in message and "trials need" in message
        assert not (config.output.dir / "trials").exists()

    def test_sandbox_memory_no_node_has_is_insufficient_hardware_at_once(self, tmp_path, nearly_full):
        from reb_ray.sweep.run import run_sweep

        write_suite(tmp_path / "suites", 2)
        config = SweepConfig(output=tmp_path / "runs", suite="nodes", tasks_root=tmp_path / "suites", agents=["noop"],
                             sandbox="sleep", memory_bytes=1024**5)
        start = time.monotonic()
        result = run_sweep(config, show_progress=False)
        assert time.monotonic() - start < 60 and result.attempts == 2 and result.slot_workers == 0
        for row in read_trials(config.output.dir).to_pylist():
            assert (row["status"], row["failure_owner"], row["failure_category"]) == ("infra_error", "hardware",
                                                                                       "insufficient_hardware")
            assert "needs 1.04858e+06 GiB of memory per sandbox (--memory-gb)" in row["failure_reason"]


def test_a_node_joining_mid_sweep_gets_slots(tmp_path, raylets, sleep_script):
    from reb_ray.sweep.run import run_sweep

    raylets(head={"num_cpus": 1})
    write_suite(tmp_path / "suites", 8)
    config = SweepConfig(output=tmp_path / "runs", suite="nodes", tasks_root=tmp_path / "suites", agents=["noop"],
                         sandbox="sleep")
    joiner = raylets.join(1.0, ["--num-cpus", "2"])
    result = run_sweep(config, show_progress=False)
    joiner.join()
    assert result.attempts == 8 and result.scored == 8
    ledger = _ledger(sleep_script)
    # The head holds one slot; more than one trial at once means the joined node ran some.
    assert _max_overlap(ledger) >= 2 and result.slot_workers >= 2
    assert len({e["pid"] for e in ledger}) >= 2


def test_gpu_trials_wait_for_an_autoscaled_gpu_node_and_run_on_its_gpu(tmp_path, raylets, sleep_script):
    """The autoscaler's node types (a real bootstrap config file) say a 1-GPU node may join: GPU
    trials keep their GPU and wait for it instead of running without one; once the node joins,
    they run on its GPU."""
    from reb_ray.sweep.expand import expand
    from reb_ray.orchestrators.ray_orchestrator import RayOrchestrator, SlotTiming

    raylets(head={"num_cpus": 1})
    bootstrap = tmp_path / "ray_bootstrap_config.yaml"
    bootstrap.write_text("max_workers: 2\navailable_node_types:\n  head: {resources: {CPU: 1}, max_workers: 0}\n"
                         "  gpu_worker: {resources: {CPU: 2, GPU: 1}, min_workers: 0, max_workers: 2}\n")
    write_suite(tmp_path / "suites", 2, gpu=True)
    config = SweepConfig(output=tmp_path / "runs", suite="nodes", tasks_root=tmp_path / "suites", agents=["noop"],
                         sandbox="sleep")
    specs, _ = expand(config, None)
    outcomes = []
    orchestrator = RayOrchestrator(config, timing=SlotTiming(poll_s=1.0, autoscaler_config=bootstrap))
    joiner = raylets.join(2.0, ["--num-cpus", "2", "--num-gpus", "1"], {"CUDA_VISIBLE_DEVICES": "30"})
    orchestrator.run(specs, lambda outcome, retry: outcomes.append(outcome))
    joiner.join()
    assert [o.status for o in outcomes] == ["scored", "scored"]
    assert sorted(e["gpus"] for e in _ledger(sleep_script)) == [["30"], ["30"]]


def test_reb_ray_slot_caps_concurrent_sandboxes_per_node(tmp_path, raylets, sleep_script):
    from reb_ray.sweep.run import run_sweep

    raylets(head={"num_cpus": 4, "resources": {"reb_ray_slot": 1}})
    write_suite(tmp_path / "suites", 3)
    config = SweepConfig(output=tmp_path / "runs", suite="nodes", tasks_root=tmp_path / "suites", agents=["noop"],
                         sandbox="sleep")
    result = run_sweep(config, show_progress=False)
    assert result.scored == 3 and result.slot_workers == 1  # 4 CPUs, but a cap of one sandbox
    assert _max_overlap(_ledger(sleep_script)) == 1


def test_a_wrong_address_fails_in_seconds_naming_it(slow_process, tmp_path):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start = time.monotonic()
    res = subprocess.run([sys.executable, "-c", "from reb_ray.cli import main; main()", "sweep", "--sandbox", "sleep",
                          "--address", f"127.0.0.1:{port}", "--output", str(tmp_path / "runs"), "--quiet"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "REB_RAY_SLEEP_SCRIPT": "/nonexistent"})
    seconds = time.monotonic() - start
    assert res.returncode == 2 and seconds < 20, (seconds, res.stderr[-500:])
    (line,) = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert f"no Ray cluster at --address 127.0.0.1:{port}: cannot connect" in line
    assert not (tmp_path / "runs").exists()  # nothing written (not even the sweep's identity)


@pytest.fixture
def second_docker():
    """A second Docker daemon on this machine (tests/helpers/private_dockerd.py): the Docker of a node
    that lacks the sandbox image. Yields its DOCKER_HOST."""
    daemon = PrivateDockerd(Path(tempfile.mkdtemp(prefix="rr-d2-", dir="/tmp")))
    try:
        daemon.start()
        yield daemon.host
    finally:
        daemon.close()


def _tiny_image(client, tag: str, tmp: Path) -> None:
    """A one-file image made with `docker import` (no registry)."""
    (tmp / "hello").write_text("hi\n")
    archive = tmp / f"{tag.replace('/', '_').replace(':', '_')}.tar"
    subprocess.run(["tar", "-C", str(tmp), "-cf", str(archive), "hello"], check=True)
    repository, version = tag.split(":")
    client.api.import_image_from_file(str(archive), repository=repository, tag=version)


def test_a_node_lacking_the_image_gets_it_shipped_and_each_node_reaps_its_own_orphans(tmp_path, raylets, second_docker):
    import docker

    from reb_ray.orchestrators.node_check import NodeChecks, NodeRequirements, alive_nodes, check_all
    from reb_ray.sandbox.ownership import MANAGED, SWEEP, TRIAL, ATTEMPT, Owner, process_start_ticks

    main_client, other = docker.from_env(), docker.DockerClient(base_url=second_docker, timeout=60)
    tag = f"reb-ray-test/tiny:{os.getpid()}-{int(time.time())}"
    _tiny_image(main_client, tag, tmp_path)
    _tiny_image(other, "reb-ray-test/other:1", tmp_path)
    gone = subprocess.Popen(["sleep", "60"])
    owner = Owner(os.uname().nodename, gone.pid, process_start_ticks(gone.pid))
    gone.kill()
    gone.wait()
    orphan = other.containers.create("reb-ray-test/other:1", ["/hello"], network_mode="none", labels={
        MANAGED: "true", SWEEP: "node-check", TRIAL: "noop/t0/0", ATTEMPT: "1", **owner.labels()})
    try:
        raylets(head={"num_cpus": 1}, nodes=[{"num_cpus": 1, "env_vars": {"DOCKER_HOST": second_docker}}])
        checks = NodeChecks(NodeRequirements(tag, 1))
        passed, failed = check_all(checks, alive_nodes())
        import ray

        while checks.busy:  # the second node loads the shipped archive
            for ref in ray.wait(checks.refs(), num_returns=1, timeout=1.0)[0]:
                verdict = checks.on_ready(ref)
                if verdict is not None:
                    (passed if verdict.ok else failed).append(verdict)
        checks.close()
        assert failed == [] and len(passed) == 2
        (loaded,) = [v for v in passed if v.image_loaded]
        assert loaded.reaped == 1 and loaded.health.image_present
        other.images.get(tag)  # really loaded there
        with pytest.raises(docker.errors.NotFound):
            other.containers.get(orphan.id)
    finally:
        for client, name in ((main_client, tag), (other, tag), (other, "reb-ray-test/other:1")):
            try:
                client.images.remove(name, force=True)
            except docker.errors.DockerException:
                pass
