"""Full-log artifacts: gzip files streamed chunk by chunk, bounded per attempt, secrets masked."""

from __future__ import annotations

import gzip
import os

from reb_ray.trial.artifacts import CUT_MARK, TrialArtifacts, search_log
from reb_ray.redact import Redactor


def _chunks(data: bytes, size: int):
    return (data[i:i + size] for i in range(0, len(data), size))


def test_a_log_decompresses_to_the_whole_output_and_appears_only_when_closed(tmp_path):
    arts = TrialArtifacts(tmp_path, "sweep/1", "noop/task/0", 2)
    data = b"".join(b"step %d loss %f\n" % (i, i / 7) for i in range(200_000))
    log = arts.log("c1")
    assert log.path == "artifacts/sweep_id=sweep%2F1/noop%2Ftask%2F0/2/c1.log.gz"
    for chunk in _chunks(data, 4093):
        log.write(chunk)
    assert not (tmp_path / log.path).exists()  # only the hidden .part file until closed
    log.close()
    log.write(b"after close")  # a late chunk of a background child: ignored
    assert gzip.open(tmp_path / log.path).read() == data
    assert not log.cut and log.kept_bytes == len(data) and arts.spent == os.path.getsize(tmp_path / log.path)
    assert sorted(p.name for p in (tmp_path / log.path).parent.iterdir()) == ["c1.log.gz"]
    assert search_log(tmp_path / log.path, [r"^step 199999 ", "nope"]) == {r"^step 199999 ": True, "nope": False}


def test_the_attempt_budget_cuts_logs_with_a_mark(tmp_path):
    arts = TrialArtifacts(tmp_path, "s", "a/t/0", 1, budget_bytes=256 * 1024)
    noise = os.urandom(3 * 1024 * 1024)  # incompressible: the budget is reached after ~256 KiB
    with arts.log("agent") as first:
        for chunk in _chunks(noise, 65536):
            first.write(chunk)
    with arts.log("c1") as second:
        second.write(b"nothing of this is kept\n")
    text = gzip.open(tmp_path / first.path).read()
    assert first.cut and first.kept_bytes + first.dropped_bytes == len(noise)
    assert text == noise[:first.kept_bytes] + CUT_MARK.format(dropped=first.dropped_bytes, budget=256 * 1024).encode()
    assert os.path.getsize(tmp_path / first.path) < 256 * 1024 + 1024 * 1024  # budget + one compressor buffer
    assert gzip.open(tmp_path / second.path).read() == CUT_MARK.format(dropped=24, budget=256 * 1024).encode()


def test_credentials_are_masked_also_when_split_across_chunks(tmp_path):
    secret = "sk-test-0123456789abcdef"
    arts = TrialArtifacts(tmp_path, "s", "a/t/0", 1, redactor=Redactor([secret]))
    data = f"my key is {secret}!\n".encode() * 1000
    with arts.log("agent") as log:
        for chunk in _chunks(data, 7):  # every split position of the secret occurs
            log.write(chunk)
    assert gzip.open(tmp_path / log.path).read() == b"my key is ***!\n" * 1000


def test_a_shipped_attempt_writes_nothing_on_its_node_and_the_driver_stores_it(slow_process, tmp_path):
    """Issue 13 item 5: with ship_artifacts the logs travel in the outcome (no shared filesystem
    assumed); `store` writes them where the rows say, and refuses a path outside artifacts/."""
    import pytest

    from reb_ray.trial.artifacts import store
    from reb_ray.models.sweep import SweepConfig, TrialSpec
    from reb_ray.suite.load import load_suite
    from reb_ray.trial.run import run_trial

    config = SweepConfig(sandbox="local", wheelhouses=[], pip_cache=False, output=tmp_path / "node-view")
    task = next(t for t in load_suite("demo") if t.id == "numpy-trainer")
    out = run_trial(TrialSpec(sweep_id="ship", agent="heuristic", task=task, trial_index=0, config=config),
                    ship_artifacts=True)
    assert out.trial["status"] == "scored" and out.trial["agent_log_path"] in out.artifacts
    assert not (tmp_path / "node-view" / "artifacts").exists()
    stage_logs = {s["log_path"] for s in out.stages if s.get("log_path")}
    assert stage_logs and stage_logs <= set(out.artifacts)
    driver = tmp_path / "driver"
    store(driver, out.artifacts)
    with gzip.open(driver / out.trial["agent_log_path"]) as f:
        assert f.read()  # the agent's whole output, where the row points
    for bad in ("../escape.log.gz", "/etc/x", "trials/x.parquet"):
        with pytest.raises(ValueError):
            store(driver, {bad: b"x"})
