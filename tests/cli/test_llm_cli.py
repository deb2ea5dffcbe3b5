"""The real `reb-ray llm` commands: serve a script over HTTP, list prices, bad input in one line."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from reb_ray.llm.apis import CHAT
from tests.cli.in_process import run_cli
from tests.llm.clients import post, request_body

ROOT = Path(__file__).resolve().parents[2]
# This checkout's CLI (the venv's console script may import another checkout).
CLI = [sys.executable, "-c", "from reb_ray.cli import main; main()"]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_serve_answers_the_script_until_interrupted(slow_process, tmp_path):
    script = tmp_path / "s.toml"
    script.write_text('model = "m"\n[[turns]]\nkind = "tool"\ncommand = "ls -la"\n')
    server = subprocess.Popen([*CLI, "llm", "serve", "--script", str(script), "--port", "0"], cwd=ROOT, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        line = server.stdout.readline()
        url = re.search(r"on (http://127\.0\.0\.1:\d+) \(1 turns, model m\)", line)
        assert url, line + server.stderr.read()
        answer = post(url[1], CHAT, request_body(CHAT, False), "k").json()
        assert answer["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] == '{"command": "ls -la"}'
    finally:
        server.send_signal(signal.SIGINT)
        out, err = server.communicate(timeout=30)
    assert server.returncode == 0, err
    assert "stopped" in out


def test_serve_a_bad_script_is_one_line_and_exit_2(slow_process, tmp_path):
    script = tmp_path / "bad.json"
    script.write_text('{"turns": [{"kind": "error", "status": 200}]}')
    res = run("llm", "serve", "--script", str(script))
    assert res.returncode == 2
    assert res.stderr == f"error: {script}: turns[0].status = 200: Input should be greater than or equal to 400\n"


def test_prices_lists_the_shipped_table():
    res = run_cli("llm", "prices")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == "price table 2026-12-01 (USD per million tokens)"
    assert re.search(r"^claude-sonnet-4-5\s+3\s+0\.3\s+3\.75\s+15$", res.stdout, re.M)
    assert re.search(r"^gpt-5\.1-codex\s+1\.25\s+0\.125\s+=input\s+10$", res.stdout, re.M)
