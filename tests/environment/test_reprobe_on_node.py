"""Work on the node that holds what it needs, through `reb_ray.orchestrators.on_node.NodeRunner`:
`reb-ray regrade --rerun-probes --address` re-probes an attempt whose environment was kept on
another node on that node, and `reb-ray sweep --address ... --verify-exports` exports and
rebuilds a success built on another node there. The other node is a real raylet of a real Ray
cluster, started once for the module in a UTS namespace of its own so that its hostname (what a
trials row's `node` records) is not this machine's; it shares this machine's Docker, as a second
node's own Docker would hold its own images. In its mount namespace a directory of the driver's
(`hidden`) is an empty tmpfs: an output directory there is the driver's alone, as on a cluster
without a shared filesystem. The source attempts run there too, through the same runner. (A node
that finds the image in its own Docker re-probes it itself: this machine would, so the test
always asks the cluster.)"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

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


def _far_raylet(address: str, hostname: str, hidden: Path) -> subprocess.Popen:
    """`ray start --block` joined to `address`, in a UTS namespace whose hostname is `hostname`
    and a mount namespace where `hidden` is an empty tmpfs."""
    ray_cli = str(Path(sys.executable).with_name("ray"))
    script = (f"hostname {hostname} && mount -t tmpfs reb-hidden {shlex.quote(str(hidden))} && "
              f'exec "$0" start --address {address} --block --disable-usage-stats --num-cpus 2')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    return subprocess.Popen(["unshare", "--uts", "--mount", "sh", "-c", script, ray_cli], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def far_node(tmp_path_factory):
    """The cluster (this machine's head, joined here, and the far raylet): its `address`, the far
    node's `host`name, a `run_on` NodeRunner, and the `hidden` directory the far node cannot see."""
    from reb_ray.orchestrators.on_node import NodeRunner

    far, hidden = f"reb-far-{uuid.uuid4().hex[:6]}", tmp_path_factory.mktemp("driver-only")
    with ray_cluster({"num_cpus": 1}) as cluster:
        raylet = _far_raylet(cluster.address, far, hidden)
        try:
            deadline = time.monotonic() + 120
            while far not in NodeRunner.hosts():
                assert raylet.poll() is None and time.monotonic() < deadline, "the far raylet never joined"
                time.sleep(0.5)
            yield SimpleNamespace(address=cluster.address, host=far, run_on=NodeRunner(cluster.address), hidden=hidden)
        finally:
            os.killpg(raylet.pid, signal.SIGTERM)
            try:
                raylet.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(raylet.pid, signal.SIGKILL)
                raylet.wait()


def _verdicts(out: Path, sweep: str) -> dict[str, tuple]:
    return {s["stage"]: tuple(s[k] for k in VERDICT) for s in read_stages(out, sweep).to_pylist() if s["stage"] in PROBE_ROWS}


@pytest.mark.timeout(900)
def test_an_attempt_kept_on_another_node_is_reprobed_there(far_node, tmp_path, sandbox_image, docker_client):
    from reb_ray.orchestrators.on_node import NodeGone
    from reb_ray.trial import run_trial

    far, run_on, out = far_node.host, far_node.run_on, tmp_path / "out"
    with pytest.raises(NodeGone, match=r"^node reb-nowhere is not in the cluster \(alive: "):
        run_on("reb-nowhere", len, ((),))
    image_id = None
    try:
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
        res = run_cli("regrade", str(out), "--rerun-probes", "--address", far_node.address)
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


@pytest.mark.timeout(900)
def test_a_success_built_on_another_node_is_exported_and_verified_there(far_node, tmp_path, sandbox_image, capsys):
    """`--verify-exports` after a sweep on the cluster (the CLI's step, given the sweep's config):
    the far node's success is exported and rebuilt there from what the driver shipped, and its
    export directory and one record land in the output, which the far node cannot see."""
    from reb_ray.cli.sweep import _verify_exports
    from reb_ray.testing.suite import write_task
    from reb_ray.results.verifications import read_verifications
    from reb_ray.sweep.verify_exports import export_dir
    from reb_ray.trial import artifacts, run_trial

    far, root = far_node.host, tmp_path / "suites"
    # a bundled task whose CPU stage needs nothing beyond the image's Python: noop's attempt is a success
    write_task(root, "tiny", "tiny", cpu='command = "python main.py"', files={"main.py": "print('tiny ran')\n"})
    out = far_node.hidden / "out"
    config = SweepConfig(suite="tiny", tasks_root=root, output=out, keep_environments="none", address=far_node.address)
    spec = TrialSpec(sweep_id="farv", agent="noop", task=load_suite("tiny", root)[0], trial_index=0,
                     image=sandbox_image, config=config)
    # As in a sweep: the attempt runs on the far node, its logs and manifest come back with its rows.
    outcome = far_node.run_on(far, run_trial, (spec, None, None, None, True))
    assert (outcome.trial["node"], outcome.trial["c1_status"]) == (far, "success"), outcome.trial["failure_reason"]
    artifacts.store(out, outcome.artifacts)
    with ParquetSink(out, flush_interval_s=0) as sink:
        sink.write([outcome.trial], outcome.stages)
    assert out.is_dir() and not far_node.run_on(far, os.path.isdir, (str(out),))  # the driver's alone

    _verify_exports(config, "farv")
    [record] = read_verifications(out)
    where = export_dir(out, outcome.trial)
    assert (record["verdict"], record["verified_on"], record["export"]) == ("reproducible: yes", far, str(where.resolve()))
    assert (where / "repo" / "main.py").is_file() and (where / "Dockerfile").is_file()
    assert json.loads((where / "verification.json").read_text())["export"] == str(where.resolve())
    assert f"noop/tiny/0 attempt 1 on {far}: reproducible: yes (rebuild " in capsys.readouterr().out
