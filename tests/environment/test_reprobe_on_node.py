"""`reb-ray regrade --rerun-probes --address`: an attempt whose environment was kept on another
node is re-probed on that node. The other node is a real raylet of a real Ray cluster, started
in a UTS namespace of its own so that its hostname (what a trials row's `node` records) is not
this machine's; it shares this machine's Docker, as a second node's own Docker would hold its
own images. The attempt itself runs there too, through the same runner. (A node that finds the
image in its own Docker re-probes it itself: this machine would, so the test always asks the
cluster.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from reb_ray.models.sweep import SweepConfig, TrialSpec
from reb_ray.results.parquet_sink import ParquetSink
from reb_ray.results.read import read_stages, read_trials
from reb_ray.suite.load import load_suite
from reb_ray.sweep.reprobe import PROBE_ROWS
from reb_ray.testing.ray_cluster import ROOT, ray_cluster
from tests.cli.in_process import run_cli

pytestmark = pytest.mark.docker

VERDICT = ("status", "failure_category", "reason")


def _far_raylet(address: str, hostname: str) -> subprocess.Popen:
    """`ray start --block` joined to `address`, in a UTS namespace whose hostname is `hostname`."""
    ray_cli = str(Path(sys.executable).with_name("ray"))
    script = f'hostname {hostname} && exec "$0" start --address {address} --block --disable-usage-stats --num-cpus 2'
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    return subprocess.Popen(["unshare", "--uts", "sh", "-c", script, ray_cli], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _verdicts(out: Path, sweep: str) -> dict[str, tuple]:
    return {s["stage"]: tuple(s[k] for k in VERDICT) for s in read_stages(out, sweep).to_pylist() if s["stage"] in PROBE_ROWS}


@pytest.mark.timeout(900)
def test_an_attempt_kept_on_another_node_is_reprobed_there(tmp_path, sandbox_image, docker_client):
    from reb_ray.orchestrators.on_node import NodeGone, NodeRunner
    from reb_ray.trial import run_trial

    far = f"reb-far-{uuid.uuid4().hex[:6]}"
    out = tmp_path / "out"
    with ray_cluster({"num_cpus": 1}) as cluster:
        raylet = _far_raylet(cluster.address, far)
        image_id = None
        try:
            deadline = time.monotonic() + 120
            while far not in NodeRunner.hosts():
                assert raylet.poll() is None and time.monotonic() < deadline, "the far raylet never joined"
                time.sleep(0.5)
            run_on = NodeRunner(cluster.address)
            with pytest.raises(NodeGone, match=r"^node reb-nowhere is not in the cluster \(alive: "):
                run_on("reb-nowhere", len, ((),))

            # The attempt runs on the far node and keeps its environment in the Docker it sees.
            task = next(t for t in load_suite("demo") if t.id == "numpy-trainer")
            spec = TrialSpec(sweep_id="far", agent="noop", task=task, trial_index=0, image=sandbox_image,
                             config=SweepConfig(output=out, keep_environments="scored"))
            outcome = run_on(far, run_trial, (spec,))
            source = outcome.trial
            image_id = source["env_image_id"]
            assert (source["status"], source["node"], source["env_kept"]) == ("scored", far, True), source["failure_reason"]
            with ParquetSink(out, flush_interval_s=0) as sink:
                sink.write([source], outcome.stages)

            # With it, the probe phase runs on the far node; the rows and logs land here.
            res = run_cli("regrade", str(out), "--rerun-probes", "--address", cluster.address)
            assert res.returncode == 0, res.stderr
            assert res.stdout.splitlines()[0].startswith("noop/numpy-trainer/0 attempt 1 of far: same verdicts; "), res.stdout
            [row] = read_trials(out, "far-reprobe").to_pylist()
            assert (row["node"], row["status"], row["reused_from"], row["env_image_id"]) == (far, "scored", "far", image_id)
            assert _verdicts(out, "far-reprobe") == _verdicts(out, "far") and _verdicts(out, "far")
            c1 = next(s for s in read_stages(out, "far-reprobe").to_pylist() if s["stage"] == "c1")
            assert c1["log_path"].startswith("artifacts/sweep_id=far-reprobe/") and (out / c1["log_path"]).is_file()
        finally:
            if image_id:
                docker_client.images.remove(image_id, force=True)
            os.killpg(raylet.pid, signal.SIGTERM)
            try:
                raylet.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(raylet.pid, signal.SIGKILL)
                raylet.wait()
