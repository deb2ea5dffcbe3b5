"""`show_trial` prints what the agent controlled without letting it drive the terminal.

Property (issue 11, item 5): whatever the agent's output tail, failure reason and report-stage
reason hold (escape sequences, bidi overrides, NUL, non-UTF-8 decoded with replacement), the
printed text has no terminal control character but newline and tab, and the failure reason is still
there whole, each control character shown as its escape.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analysis.trial_view import show_trial
from reb_ray.terminal import printable
from tests.analysis.runs import row, write_run

UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
ESCAPES = st.sampled_from(["\x1b[2J", "\x1b]0;pwned\x07", "\x1b[1A\x1b[2K", "\r", "\x9b31m", "\u202e", "\x00", "\x08" * 5,
                           "\x1bP+q544e\x1b\\", "\ufffd"])
agent_text = st.lists(st.text(max_size=20) | ESCAPES, max_size=12).map("".join)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tail=agent_text, reason=agent_text)
def test_trial_show_never_prints_a_control_character(tail, reason):
    with tempfile.TemporaryDirectory() as tmp:
        write_run(Path(tmp), [row("a", "t1", 1, "scored", agent_output_tail=tail, failure_reason=reason)])
        out = show_trial(Path(tmp), "a/t1/0")
    assert not UNSAFE.search(out)
    assert not reason or printable(reason) in out  # the reason is shown whole, only defused


def test_printable_shows_each_control_character_as_its_escape():
    assert printable("ok\x1b[2J\tgone\u202e\n") == "ok\\x1b[2J\tgone\\u202e\n"
    assert printable("plain text, é, 漢字") == "plain text, é, 漢字"


def test_trial_show_says_what_was_changed_and_put_back_and_each_stages_witness(tmp_path):
    from reb_ray.results.parquet_sink import ParquetSink

    trial = row("a", "t1", 1, "scored", failure_owner="agent", failure_category="unverified_run", repo_modified=False,
                repo_modified_files=[], repo_restored=True, repo_restored_files=["train.py"], repo_head_moved=True)
    stage = {"sweep_id": "s1", "trial_id": "a/t1/0", "attempt": 1, "task_id": "t1", "agent": "a", "stage": "c1",
             "status": "failure", "failure_category": "unverified_run", "exit_code": 0, "witness_status": "unverified",
             "witness_interpreters": 2, "witness_repo_files": None, "reason": "command succeeded but the run is unverified"}
    ParquetSink(tmp_path).write([trial], [stage])
    out = show_trial(tmp_path, "a/t1/0")
    assert "repo     changed (git status): nothing; restored to the pinned commit: train.py (HEAD moved) (restore done)" in out
    assert "exit 0  witness unverified (2 interpreter(s), - pinned file(s))  command succeeded but" in out


def test_trial_show_lists_every_log_of_the_attempt(tmp_path):
    """The trial's logs, each stage's, and a file of the attempt's artifact directory no column
    names; a named file that is gone says so. Logs of another attempt are not listed."""
    from reb_ray.trial.artifacts import artifact_dir
    from reb_ray.results.parquet_sink import ParquetSink

    base = artifact_dir("s1", "a/t1/0", 2)
    files = {f"{base}/agent.log.gz": b"a", f"{base}/c1.log.gz": b"bb", f"{base}/llm_requests.jsonl.gz": b"ccc",
             f"{base}/between_phases.log.gz": b"dddd", f"{artifact_dir('s1', 'a/t1/0', 1)}/agent.log.gz": b"old"}
    for rel, data in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(data)
    trial = row("a", "t1", 2, "scored", agent_log_path=f"{base}/agent.log.gz", llm_log_path=f"{base}/llm_requests.jsonl.gz",
                network_log_path=f"{base}/network.jsonl.gz")
    stage = {k: trial[k] for k in ("sweep_id", "trial_id", "attempt", "task_id", "agent")}
    sink = ParquetSink(tmp_path)
    sink.write([row("a", "t1", 1, "infra_error", agent_log_path=f"{artifact_dir('s1', 'a/t1/0', 1)}/agent.log.gz")], [])
    sink.write([trial], [{**stage, "stage": "agent", "status": "success", "log_path": f"{base}/agent.log.gz"},
                         {**stage, "stage": "c1", "status": "failure", "log_path": f"{base}/c1.log.gz"}])
    sink.close()
    out = show_trial(tmp_path, "a/t1/0")
    listing = out[out.index("files    "):]
    assert listing.splitlines()[0] == f"files    5 file(s) of attempt 2, paths under {tmp_path}:"
    assert f"agent log      {base}/agent.log.gz (1 bytes)" in listing
    assert f"request log    {base}/llm_requests.jsonl.gz (3 bytes)" in listing
    assert f"network log    {base}/network.jsonl.gz (missing)" in listing
    assert f"c1 log         {base}/c1.log.gz (2 bytes)" in listing
    assert f"other          {base}/between_phases.log.gz (4 bytes)" in listing
    assert "/1/agent.log.gz" not in listing
    assert listing.count(f"{base}/agent.log.gz") == 1  # the agent stage names the same log: listed once


def test_trial_show_names_the_environment_and_reads_commands_from_its_manifest(tmp_path):
    """A heuristic attempt keeps no transcript: its commands come from the environment manifest's
    `commands` list; the env line gives the manifest's path and digest, and the image only when kept."""
    import gzip
    import json

    from reb_ray.results.parquet_sink import ParquetSink
    from reb_ray.trial.artifacts import artifact_dir

    rel = f"{artifact_dir('s1', 'heuristic/t1/0', 1)}/env_manifest.json.gz"
    manifest = {"commands": {"source": "agent_log", "list": [
        {"command": "/usr/bin/python3 -m venv /opt/envs/heuristic", "exit_code": 0},
        {"command": "/opt/envs/heuristic/bin/python -m pip install numpy", "exit_code": 1},
        {"command": "set -e\nmkdir -p /opt/x\nprintf '%s' '{\"a\": 1}' > r.json", "exit_code": 0}]}}
    (tmp_path / rel).parent.mkdir(parents=True)
    (tmp_path / rel).write_bytes(gzip.compress(json.dumps(manifest).encode()))
    kept = row("heuristic", "t1", 1, "scored", agent_kind="heuristic", env_manifest_path=rel, env_manifest_digest="ab" * 32,
               env_manifest_bytes=190, env_keep_policy="successes", env_kept=True, env_image_id="sha256:" + "c" * 64,
               env_image_tag="reb-ray/env:s1-x", env_image_bytes=3_000_000, env_image_total_bytes=200_000_000, node="n1")
    dropped = row("noop", "t1", 1, "scored", agent_kind="noop", env_manifest_path=None, env_capture_error="boom",
                  env_keep_policy="successes", env_kept=False)
    sink = ParquetSink(tmp_path)
    sink.write([kept, dropped], [])
    sink.close()
    out = show_trial(tmp_path, "heuristic/t1/0")
    assert (f"commands (3; no transcript stored: the agent kind heuristic keeps none; from the environment manifest "
            f"{rel}, its `commands` list):") in out
    assert "  [1] $ /opt/envs/heuristic/bin/python -m pip install numpy\n      exit 1" in out
    # a script's line breaks stay on its listing line, so the status line below it still lines up
    assert "  [2] $ set -e\\nmkdir -p /opt/x\\nprintf '%s' '{\"a\": 1}' > r.json\n      exit 0" in out
    assert (f"env      manifest {rel} (sha256 {'ab' * 32}, 190 bytes of JSON, gzipped on disk); kept as image reb-ray/env:s1-x "
            f"(sha256:cccccccccccc) on n1: its layer 3.0 MB, whole image 200.0 MB") in out
    assert f"env manifest   {rel} (" in out
    out = show_trial(tmp_path, "noop/t1/0")
    assert "env      no manifest (boom); kept: no (policy successes)" in out and "MiB" not in out
    assert "commands: none recorded (no transcript stored: the agent kind noop keeps none; no commands" in out


def test_money_is_shown_as_dollars_to_the_price_tables_precision(tmp_path):
    """A sum of per-request costs carries float noise (three requests at $0.0041 sum to
    0.012300000000000002); trial show prints dollars to six decimals, never the raw float."""
    write_run(tmp_path, [row("a", "t1", 1, "scored", llm_requests=3, cost_usd=0.1 + 0.2,
                             agent_reported_cost_usd=sum([0.0041] * 3))])
    out = show_trial(tmp_path, "a/t1/0")
    assert "cost     $0.300000" in out and "0.30000000000000004" not in out
    assert "cost $0.012300" in out and "0.0123000" + "00000002" not in out
