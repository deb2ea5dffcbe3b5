"""The asset cache: fetching from a real local HTTP server, and failing fast when missing."""

from __future__ import annotations

import http.server
import threading
from functools import partial

import pytest

from reb_ray.assets import fetch_assets
from reb_ray.errors import InfraError
from reb_ray.models.sweep import SweepConfig, TrialSpec
from reb_ray.models.task import load_task
from reb_ray.trial import _preflight

TASK = """
id = "needs-assets"
suite = "assets"
category = "1_cpu"
source = {{ bundled = "repo" }}
assets = [
  {{ name = "weights", kind = "model", path = "models/tiny.bin", source = "http://127.0.0.1:{port}/tiny.bin" }},
  {{ name = "by-hand", kind = "dataset", path = "data/one.json" }},
]

[stages.cpu]
command = "python main.py"
"""


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
    task_dir = tmp_path / "suites" / "assets" / "needs-assets"
    (task_dir / "repo").mkdir(parents=True)
    (task_dir / "task.toml").write_text(TASK.format(port=server))
    return load_task(task_dir / "task.toml")


def test_fetch_downloads_once_and_reports_what_it_cannot(tmp_path, task):
    cache = tmp_path / "cache"
    first = {r.asset: r for r in fetch_assets([task], cache)}
    assert first["weights"].state == "fetched" and (cache / "models/tiny.bin").read_bytes() == b"\x00\x01weights"
    assert first["by-hand"].state == "failed" and "no source" in first["by-hand"].detail
    again = {r.asset: r.state for r in fetch_assets([task], cache)}
    assert again["weights"] == "present"


def test_a_missing_asset_fails_fast_as_infra_naming_it(tmp_path, task):
    cache = tmp_path / "cache"
    fetch_assets([task], cache)
    spec = TrialSpec(sweep_id="s", agent="noop", task=task, trial_index=0, config=SweepConfig(assets_dir=cache))
    with pytest.raises(InfraError) as err:
        _preflight(spec)
    assert err.value.category == "infra_assets_missing" and "'by-hand'" in str(err.value)
    (cache / "data").mkdir()
    (cache / "data/one.json").write_text("{}")
    _preflight(spec)  # everything present: no error
