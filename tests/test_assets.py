"""The asset cache: fetching from a real local HTTP server, and failing fast when missing."""

from __future__ import annotations

import http.server
import threading
from functools import partial
from pathlib import Path

import pytest

from reb_ray.suite.assets import fetch_assets, missing_by_stage
from reb_ray.errors import InfraError
from reb_ray.models.sweep import SweepConfig, TrialSpec
from reb_ray.suite.load import load_task
from reb_ray.testing.suite import write_task
from reb_ray.trial.prepare import preflight


def _write(tmp_path: Path, task_id: str, *assets: str) -> Path:
    """A CPU-only task of suite `assets` that needs `assets`; the path of its task.toml."""
    return write_task(tmp_path / "suites", "assets", task_id, category="1_cpu", cpu='command = "python main.py"',
                      files={}, assets=assets) / "task.toml"


def _needs_assets(tmp_path: Path, port: int, by_hand: str = "") -> Path:
    return _write(tmp_path, "needs-assets",
                  f'name = "weights", kind = "model", path = "models/tiny.bin", source = "http://127.0.0.1:{port}/tiny.bin"',
                  f'name = "by-hand", kind = "dataset", path = "data/one.json"{by_hand}')


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    (root / "tiny.bin").write_bytes(b"\x00\x01weights")
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd.server_address[1]
    httpd.shutdown()


@pytest.fixture
def task(tmp_path, server):
    return load_task(_needs_assets(tmp_path, server))


def test_fetch_downloads_once_and_reports_what_it_cannot(tmp_path, task):
    cache = tmp_path / "cache"
    first = {r.asset: r for r in fetch_assets([task], cache)}
    assert first["weights"].state == "fetched" and (cache / "models/tiny.bin").read_bytes() == b"\x00\x01weights"
    assert first["by-hand"].state == "failed" and "no source" in first["by-hand"].detail
    again = {r.asset: r.state for r in fetch_assets([task], cache)}
    assert again["weights"] == "present"


@pytest.mark.integration
def test_a_missing_asset_fails_fast_as_infra_naming_it(tmp_path, task):
    cache = tmp_path / "cache"
    fetch_assets([task], cache)
    spec = TrialSpec(sweep_id="s", agent="noop", task=task, trial_index=0, config=SweepConfig(assets_dir=cache))
    with pytest.raises(InfraError) as err:
        preflight(spec)
    assert err.value.category == "infra_assets_missing" and "'by-hand'" in str(err.value)
    assert "needed by c1" in str(err.value) and "--skip-missing-assets" in str(err.value)
    # with --skip-missing-assets the agent runs; the probe phase leaves only c1 unmeasured
    preflight(spec.model_copy(update={"config": SweepConfig(assets_dir=cache, skip_missing_assets=True)}))
    assert {stage: [a.name for a in assets] for stage, assets in missing_by_stage(task, cache).items()} == {"c1": ["by-hand"]}
    (cache / "data").mkdir()
    (cache / "data/one.json").write_text("{}")
    preflight(spec)  # everything present: no error


# What a repository does with HF_HOME pointing into the cache and the network off: load by id,
# file by file as transformers' from_pretrained does (the model was fetched with include=["*.json"]),
# or the whole snapshot as datasets does.
LOAD_BY_ID = """
import os
from huggingface_hub import hf_hub_download, snapshot_download
print(os.path.dirname(hf_hub_download("org/tiny-model", "config.json")))
print(snapshot_download("org/tiny-data", repo_type="dataset"))
"""


@pytest.mark.integration
def test_hf_assets_land_where_offline_loading_by_id_finds_them(tmp_path):
    """`assets fetch` against a scripted Hub endpoint: hf_cache assets go into the hub cache
    layout (models--/datasets--) that offline from_pretrained-by-id reads through HF_HOME, and a
    hf://datasets/ source is fetched as a dataset, not as a model repo."""
    import os
    import subprocess
    import sys

    from tests.helpers.hub_endpoint import COMMIT, HubEndpoint

    toml = _write(tmp_path, "by-id",
                  'name = "model", kind = "model", source = "hf://org/tiny-model", layout = "hf_cache", include = ["*.json"]',
                  'name = "data", kind = "dataset", source = "hf://datasets/org/tiny-data", layout = "hf_cache"',
                  'name = "files", kind = "dataset", path = "by-id/tiny-data", source = "hf://datasets/org/tiny-data"')
    cache = tmp_path / "cache"
    cli = [str(Path(sys.executable).with_name("reb-ray")), "assets", "fetch", "--assets", str(cache),
           "--suite", "assets", "--tasks-root", str(tmp_path / "suites")]
    with HubEndpoint() as hub:
        env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HUB_DISABLE_TELEMETRY": "1"}
        first = subprocess.run(cli, capture_output=True, text=True, env=env, timeout=120)
        assert first.returncode == 0, first.stdout + first.stderr
        assert first.stdout.count("fetched ") == 3, first.stdout
        assert any("/api/datasets/org/tiny-data/revision/" in r for r in hub.requests), hub.requests
        assert not any("/api/models/org/tiny-data/" in r for r in hub.requests), hub.requests
        again = subprocess.run(cli, capture_output=True, text=True, env=env, timeout=120)
        assert again.stdout.count("present ") == 3, again.stdout
    assert (cache / "by-id/tiny-data/weights/tiny.bin").read_bytes() == b"\x00\x01" * 8
    model = cache / f"huggingface/hub/models--org--tiny-model/snapshots/{COMMIT}"
    assert sorted(p.name for p in model.rglob("*") if p.is_file() or p.is_symlink()) == ["config.json"]  # include
    offline = {**os.environ, "HF_HOME": str(cache / "huggingface"), "HF_HUB_OFFLINE": "1", "HF_ENDPOINT": "http://127.0.0.1:9"}
    res = subprocess.run([sys.executable, "-c", LOAD_BY_ID], capture_output=True, text=True, env=offline, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == [str(cache / f"huggingface/hub/{kind}s--org--tiny-{name}/snapshots/{COMMIT}")
                                  for kind, name in (("model", "model"), ("dataset", "data"))]
    task = load_task(toml)
    preflight(TrialSpec(sweep_id="s", agent="noop", task=task, trial_index=0, config=SweepConfig(assets_dir=cache)))


@pytest.mark.integration
def test_an_asset_only_a_stage_that_does_not_apply_needs_is_never_missing(tmp_path):
    """The default `stages` names c1, c3 and c4; a CPU-only task needs its assets for c1 alone."""
    task = load_task(_needs_assets(tmp_path, 9, by_hand=', stages = ["c1"]'))
    assert sorted(missing_by_stage(task, tmp_path / "empty")) == ["c1"]
    cpu_off = task.model_copy(update={"stages": task.stages.model_copy(update={"cpu": task.stages.single_gpu})})
    assert missing_by_stage(cpu_off, None) == {}  # no applicable command stage: nothing is missing
    preflight(TrialSpec(sweep_id="s", agent="noop", task=cpu_off, trial_index=0, config=SweepConfig()))
