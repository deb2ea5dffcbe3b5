"""The sleeping sandbox (issue 12, item 4): scripted phase durations, real files, nothing runs."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from reb_ray.errors import RebRayError
from reb_ray.sandbox import SandboxConfig, open_sandbox


@pytest.fixture
def script(tmp_path, monkeypatch) -> Path:
    path, ledger = tmp_path / "script.json", tmp_path / "ledger.jsonl"
    path.write_text(json.dumps({"trials": {"a/t/0": {"agent_s": 0.4, "probe_s": 0.2}, "slow/t/0": {"agent_s": 5}},
                                "ledger": str(ledger)}))
    monkeypatch.setenv("REB_RAY_SLEEP_SCRIPT", str(path))
    return ledger


def test_each_phase_takes_its_scripted_seconds_once_and_the_ledger_says_so(script):
    config = SandboxConfig(trial_id="a/t/0", attempt=2, gpus=["3", "4"])
    with open_sandbox("sleep", config) as sb:
        first = sb.exec(["python3", "-c", "import sys; sys.exit(3)"])  # nothing runs: exit 0, no output
        again = sb.exec("echo hi")
        assert sb.kill_leftovers() == []  # between the phases
        probe = sb.exec("true")
    assert first.ok and first.output == "" and 0.4 <= first.duration_s < 1.0
    assert again.ok and again.duration_s < 0.1
    assert 0.2 <= probe.duration_s < 0.8
    (entry,) = [json.loads(line) for line in script.read_text().splitlines()]
    assert (entry["trial_id"], entry["attempt"], entry["gpus"]) == ("a/t/0", 2, ["3", "4"])
    assert entry["agent_sleep"][1] - entry["agent_sleep"][0] >= 0.4 and entry["probe_sleep"][0] >= entry["agent_sleep"][1]


def test_a_sleep_past_its_timeout_is_timed_out_and_files_stay_inside(script, tmp_path):
    with open_sandbox("sleep", SandboxConfig(trial_id="slow/t/0")) as sb:
        started = time.monotonic()
        result = sb.exec("make world", timeout=0.3)
        assert result.timed_out and result.exit_code == 124 and time.monotonic() - started < 2
        (tmp_path / "f.txt").write_text("data")
        sb.put(tmp_path / "f.txt", "/opt/reb-ray-toolbox/f.txt")  # a Docker-style path: inside the sandbox
        assert sb.read_bytes("/opt/reb-ray-toolbox/f.txt") == b"data"
        assert not Path("/opt/reb-ray-toolbox/f.txt").exists()
        root = sb.root
    assert not root.exists()  # closed: removed


def test_without_a_script_it_says_what_it_needs(monkeypatch):
    monkeypatch.delenv("REB_RAY_SLEEP_SCRIPT", raising=False)
    with pytest.raises(RebRayError, match="REB_RAY_SLEEP_SCRIPT"):
        open_sandbox("sleep", SandboxConfig(trial_id="x"))
