"""Where `--verify-exports` verifies each success (reb_ray.sweep.verify_exports), without Docker
or Ray: `run_on` is a plain function standing in for the cluster's NodeRunner. A success built
here is exported here; one built on another node is shipped there as plain data (what the export
reads of the results store, and the task) and its export directory comes back as bytes; a node
that has left the cluster, and no cluster at all, give one `not attempted` record each."""

from __future__ import annotations

import gzip
import io
import json
import socket
import tarfile

import pytest

from reb_ray.errors import RebRayError
from reb_ray.results.parquet_sink import ParquetSink
from reb_ray.sweep.verify_exports import VerifiedThere, export_dir, unpack, verify_exports, verify_there
from reb_ray.testing.rows import stage_row, trial_row

MANIFEST = {"interpreter": {"prefix": "/opt/envs/a", "venv": True}, "distributions": []}
REPORT = '{"python_path": "/opt/envs/a/bin/python"}'


def _output(tmp_path):
    """Sweep `s` with three successes: built here without a manifest (its export fails here),
    built on far-1, built on gone-2."""
    out = tmp_path / "out"
    manifest = "artifacts/m/env_manifest.json.gz"
    (out / manifest).parent.mkdir(parents=True)
    (out / manifest).write_bytes(gzip.compress(json.dumps(MANIFEST).encode()))
    common = {"sweep": "s", "suite": "demo", "c1_status": "success", "agent_wall_time_s": 10.0}
    rows = [trial_row("a", "numpy-trainer", index=0, node=socket.gethostname(), env_capture_error="boom", **common),
            trial_row("a", "numpy-trainer", index=1, node="far-1", env_manifest_path=manifest, **common),
            trial_row("a", "numpy-trainer", index=2, node="gone-2", env_manifest_path=manifest, **common)]
    with ParquetSink(out, flush_interval_s=0) as sink:
        sink.write(rows, [stage_row("a", "numpy-trainer", "report", "success", index=1, sweep="s", raw=REPORT)])
    return out


def _archive() -> bytes:
    """An export directory as the far node ships it: a file, a wheel, a link in the repository."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in (("./Dockerfile", b"FROM x\n"), ("./wheels/a-1-py3-none-any.whl", b"wheel")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("./repo/latest")
        link.type, link.linkname = tarfile.SYMTYPE, "train.py"
        tar.addfile(link)
    return buffer.getvalue()


def test_each_success_is_verified_on_its_node_or_says_why_not(tmp_path):
    out = _output(tmp_path)
    calls = []

    def run_on(host, fn, args):
        calls.append(host)
        if host == "gone-2":
            raise RebRayError("node gone-2 is not in the cluster (alive: head, far-1)")
        source, task, _, mirrors = args
        assert fn is verify_there and task.id == "numpy-trainer" and mirrors == []
        assert (source.manifest, source.report, source.stages) == (MANIFEST, REPORT, {"report": "success"})
        record = {"sweep_id": "s", "trial_id": "a/numpy-trainer/1", "attempt": 1, "built": True, "reproducible": True,
                  "verdict": "reproducible: yes", "build_s": 5.0, "source_agent_wall_time_s": 10.0,
                  "verified_on": host, "export": "/tmp/scratch-there/export", "build_error": None}
        return VerifiedThere(record=record, archive=_archive())

    lines = []
    here, far, gone = verify_exports(out, "s", progress=lines.append, run_on=run_on)
    assert calls == ["far-1", "gone-2"]  # the host's own success never goes through the runner
    assert here["verdict"].startswith("reproducible: not attempted (export failed: ") and "boom" in here["verdict"]
    assert not export_dir(out, {"sweep_id": "s", "trial_id": "a/numpy-trainer/0", "attempt": 1}).exists()
    # The far node's export directory is written here, its record names it.
    where = export_dir(out, {"sweep_id": "s", "trial_id": "a/numpy-trainer/1", "attempt": 1})
    assert far["verdict"] == "reproducible: yes" and far["export"] == str(where)
    assert (where / "Dockerfile").read_text() == "FROM x\n" and (where / "repo" / "latest").readlink().name == "train.py"
    assert json.loads((where / "verification.json").read_text())["export"] == str(where.resolve())
    assert lines[1] == "a/numpy-trainer/1 attempt 1 on far-1: reproducible: yes (rebuild 5.0 s = 0.50x the agent phase's 10.0 s)"
    assert gone["verdict"] == "reproducible: not attempted (node gone-2 is not in the cluster (alive: head, far-1))"
    dataset = [json.loads(line) for line in (out / "environments" / "verifications.jsonl").read_text().splitlines()]
    assert [(d["trial_id"], d["reproducible"]) for d in dataset] == [
        ("a/numpy-trainer/0", None), ("a/numpy-trainer/1", True), ("a/numpy-trainer/2", None)]
    assert "build_error" not in dataset[1] and dataset[1]["export"] == str(where.resolve())
    assert verify_exports(out, "s", run_on=run_on) == [] and calls == ["far-1", "gone-2"]  # each once


def test_without_a_cluster_a_success_built_elsewhere_names_its_node(tmp_path):
    _, far, gone = verify_exports(_output(tmp_path), "s")
    for record, node in ((far, "far-1"), (gone, "gone-2")):
        assert record["verdict"].startswith(f"reproducible: not attempted (its environment was built on node {node}, ")


def test_a_shipped_export_never_lands_outside_its_directory(tmp_path):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("../escaped")
        tar.addfile(info, io.BytesIO(b""))
    with pytest.raises(RebRayError, match="holds '../escaped': not a file inside the export"):
        unpack(buffer.getvalue(), tmp_path / "x" / "export")
    assert not (tmp_path / "escaped").exists() and not (tmp_path / "x").exists()
