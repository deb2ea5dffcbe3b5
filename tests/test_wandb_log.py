"""W&B from the driver (issue 14 item 7, field case F14), with the real wandb package offline.

The offline run is read back from its files: each logged table is a
`media/table/<key>_<step>_<hash>.table.json` of columns and rows.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

pytest.importorskip("wandb")
pytestmark = pytest.mark.integration  # a real W&B service process per run

from analysis.analyze import analyze_run  # noqa: E402
from analysis.plots import write_plots  # noqa: E402
from reb_ray.models.sweep import SweepConfig  # noqa: E402
from reb_ray.results.read import read_trials  # noqa: E402
from reb_ray.results.schema import STAGES_SCHEMA, TRIALS_SCHEMA  # noqa: E402
from reb_ray.sweep.wandb_log import INCREMENT_ROWS, WandbLog  # noqa: E402

UNROUTABLE = "http://10.255.255.1:9"  # no route: a W&B server that never answers


def tables(directory: Path, key: str) -> tuple[list[str], list[list]]:
    """(columns, rows) of every increment of table `key` in the one offline run under `directory`."""
    (run,) = list((directory / "wandb").glob("offline-run-*"))
    columns, rows = None, []
    for path in sorted((run / "files" / "media" / "table").glob(f"{key}_*.table.json")):
        data = json.loads(path.read_text())
        assert columns in (None, data["columns"])
        columns = data["columns"]
        rows += data["data"]
    return columns, rows


def _first_table(directory: Path, key: str, within_s: float) -> Path | None:
    """The first increment of table `key` W&B writes under `directory`, waited for up to `within_s`."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        found = sorted((directory / "wandb").glob(f"offline-run-*/files/media/table/{key}_*.table.json"))
        if found:
            return found[0]
        time.sleep(0.2)
    return None


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_BASE_URL", UNROUTABLE)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)


def test_250000_rows_offline_are_split_and_the_finish_is_bounded(tmp_path, offline):
    """F14: 250,000 rows offline. W&B's own table building is slow (about 1 s per 1,000 rows of
    this schema here), so the finish bound decides: within it W&B finishes or is abandoned with
    False, never longer; every table it wrote holds at most 10,000 rows with the schema's columns,
    in arrival order from the first row, never one truncated table."""
    n = 250_000
    rows = [{"sweep_id": "s", "trial_id": f"a/t{i}/0", "attempt": 1, "status": "scored", "agent": "a",
             "leftover_commands": ["sleep 1"] if i == 7 else None} for i in range(n)]
    wb = WandbLog("reb-ray-test", tmp_path, "s", {"suite": "demo"}, TRIALS_SCHEMA.names, STAGES_SCHEMA.names)
    wb.rows(rows, [])
    # The bound is the subject, not how fast W&B starts: on a loaded machine its service takes
    # most of a 40 s bound to come up, and the run would be abandoned before any table.
    first = _first_table(tmp_path, "trials", within_s=180)
    assert first is not None, "W&B wrote no table of 250,000 rows in 180 s"
    # 5 s of W&B's own work is well short of the ~250 s these rows need, so the bound is what ends
    # the finish; a longer bound would prove the same rule by waiting longer.
    started, bound_s = time.monotonic(), 5
    finished = wb.finish({"a/c1_success": 3}, timeout_s=bound_s)
    assert time.monotonic() - started < bound_s + 20 and not wb._process.is_alive()
    columns, back = tables(tmp_path, "trials")
    assert columns == TRIALS_SCHEMA.names and len(back) == (n if finished else len(back))
    for path in (tmp_path / "wandb").glob("offline-run-*/files/media/table/trials_*.table.json"):
        assert len(json.loads(path.read_text())["data"]) <= INCREMENT_ROWS
    assert back, f"nothing reached W&B in {bound_s} s"
    assert json.loads(back[7][columns.index("leftover_commands")]) == ["sleep 1"]  # lists as JSON text
    assert back[8][columns.index("leftover_commands")] is None  # unknown stays null


@pytest.fixture
def silent_server():
    """A W&B base URL that accepts connections and never answers (a hung server)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    server.close()


def test_a_wandb_that_never_answers_is_abandoned_within_the_bound(tmp_path, monkeypatch, silent_server):
    """Online mode against a server that accepts and never answers: finish gives up after its
    timeout, kills the logging process and returns False; nothing raises or hangs."""
    monkeypatch.setenv("WANDB_MODE", "online")
    monkeypatch.setenv("WANDB_BASE_URL", silent_server)
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)  # a key-shaped stand-in: the server never reads it
    wb = WandbLog("reb-ray-test", tmp_path, "s", {}, TRIALS_SCHEMA.names, STAGES_SCHEMA.names)
    wb.rows([{"trial_id": "a/t/0"}], [])
    started = time.monotonic()
    assert wb.finish({}, timeout_s=8) is False
    assert 7 < time.monotonic() - started < 30
    assert not wb._process.is_alive()


def test_a_sweep_with_wandb_writes_parquet_and_the_same_rows_offline(tmp_path, offline, ray_local):
    """A real sweep (local sandbox, built-in agents) with --wandb: every Parquet row is in the
    W&B trials table, with its stages, and the summary line of each agent is computed."""
    from analysis.wandb_extras import summary_and_plots
    from reb_ray.sweep.run import run_sweep

    config = SweepConfig(sweep_id="wb-sweep", output=tmp_path, sandbox="local", wheelhouses=[], pip_cache=False,
                         agents=["noop"], tasks="numpy-trainer,torch-tiny", wandb_project="reb-ray-test")
    result = run_sweep(config, show_progress=False, wandb_extras=summary_and_plots)
    assert result.attempts == 2
    parquet = read_trials(tmp_path, "wb-sweep").to_pylist()
    columns, back = tables(tmp_path, "trials")
    got = {r[columns.index("trial_id")]: r for r in back}
    assert set(got) == {r["trial_id"] for r in parquet}
    for row in parquet:
        assert got[row["trial_id"]][columns.index("c1_status")] == row["c1_status"]
    stage_columns, stages = tables(tmp_path, "stages")
    assert {r[stage_columns.index("stage")] for r in stages} >= {"agent", "report", "c0", "c1"}
    # the analysis plots, as images of the offline run: the PNGs `analysis.plots` draws of these rows
    (run,) = list((tmp_path / "wandb").glob("offline-run-*"))
    images = sorted((run / "files" / "media" / "images" / "plots").glob("*.png"))
    assert sorted(p.name.rsplit("_", 2)[0] for p in images) == ["cost_success", "failures", "heatmap", "pyramid"]
    expected = write_plots(analyze_run(tmp_path, "wb-sweep"), tmp_path / "plots")
    assert len(images) == len(expected) == 4
    assert sorted(p.read_bytes() for p in images) == sorted(p.read_bytes() for p in expected)
