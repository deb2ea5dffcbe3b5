"""A small real run for the viewer tests: the analysis fixture (reb_ray/testing/synthetic.py,
written with the real ParquetSink) with a hostile agent's words, one infra-only trial, and
stored artifacts in each transcript shape reb-ray keeps (claude stream-json, codex exec --json,
chat messages, reb-ray's own command records) with the proxy's request log."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from reb_ray.trial.artifacts import artifact_dir
from reb_ray.testing.synthetic import fixture_rows, trial, with_agent_words, write

SWEEP = "syn"
CLAUDE_TRIAL, CODEX_TRIAL, CHAT_TRIAL, COMMAND_TRIAL = "frugal/t1/0", "spender/t1/0", "spender/t2/0", "weak/t2/0"
INFRA_TRIAL = "frugal/t7/0"
#: An agent kind that keeps no transcript (the heuristic's shape): its output in the row's tail,
#: its full log named by the row and by its agent stage, its commands in the environment manifest.
HEURISTIC_TRIAL = "weak/t3/0"
HEURISTIC_OUTPUT = "[heuristic] $ python -m venv /opt/envs/heuristic\n[heuristic] exit 0\n"
MANIFEST_COMMANDS = [{"command": "python -m venv /opt/envs/heuristic", "exit_code": 0},
                     {"command": "/opt/envs/heuristic/bin/python -m pip install numpy", "exit_code": 1}]
STAGE_LOG_TEXT = "collecting torch\n" * 500 + "C1 done\n"


def lines(*events: dict) -> bytes:
    return ("\n".join(json.dumps(e) for e in events) + "\n").encode()


CLAUDE = lines(
    {"type": "system", "subtype": "init", "session_id": "sess-1", "model": "claude-sonnet-4-5"},
    {"type": "assistant", "message": {"id": "msg_1", "model": "claude-sonnet-4-5", "content": [
        {"type": "thinking", "thinking": "deps first"},
        {"type": "text", "text": "Installing the requirements."}]}},
    {"type": "assistant", "message": {"id": "msg_1", "model": "claude-sonnet-4-5", "content": [
        {"type": "tool_use", "id": "tu_1", "name": "Bash", "input": {"command": "pip install -r requirements.txt"}}]}},
    {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "tu_1",
                                              "content": "Successfully installed torch-2.4.0"}]}},
    {"type": "assistant", "message": {"id": "msg_2", "model": "claude-sonnet-4-5", "content": [
        {"type": "tool_use", "id": "tu_2", "name": "Bash", "input": {"command": "python -c 'import apex'"}}]}},
    {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "tu_2",
                                              "content": "ModuleNotFoundError: No module named 'apex'", "is_error": True}]}},
    {"type": "assistant", "message": {"id": "msg_3", "model": "claude-sonnet-4-5", "content": [
        {"type": "text", "text": "Report written to /reb/report.json."}]}},
    {"type": "result", "subtype": "success", "total_cost_usd": 0.02},
)
#: The proxy's log for CLAUDE: three answered model requests (their tokens and cost sum to the
#: fixture's frugal row: 4,000 in, 1,000 out, $0.02) and one rate-limited request.
CLAUDE_REQUESTS = [(1000, 300, 0.005), (1300, 300, 0.007), (1700, 400, 0.008)]


def request_log(requests: list[tuple[int, int, float]], refused: int = 1) -> bytes:
    events = [{"type": "meter", "requests": len(requests) + refused}]
    for i in range(refused):
        events.append({"type": "request", "started_at": 0.5 + i, "api": "anthropic", "model": "claude-sonnet-4-5",
                       "status": 429, "usage": None, "cost_usd": None, "category": "infra_llm_rate_limit"})
    for i, (inp, out, cost) in enumerate(requests):
        events.append({"type": "request", "started_at": 10.0 + i, "api": "anthropic", "model": "claude-sonnet-4-5",
                       "status": 200, "duration_s": 1.5, "cost_usd": cost,
                       "usage": {"input_tokens": inp, "cached_input_tokens": inp // 2, "cache_write_tokens": 0,
                                 "output_tokens": out, "reasoning_tokens": None}})
    return lines(*events)


CODEX = lines(
    {"type": "thread.started", "thread_id": "th-9"},
    {"type": "turn.started"},
    {"type": "item.completed", "item": {"id": "item_0", "type": "reasoning", "text": "check the README"}},
    {"type": "item.completed", "item": {"id": "item_1", "type": "command_execution", "command": "bash -lc 'pip install numpy'",
                                        "aggregated_output": "Successfully installed numpy", "exit_code": 0, "status": "completed"}},
    {"type": "item.completed", "item": {"id": "item_2", "type": "file_change", "changes": [{"path": "setup.py", "kind": "update"}]}},
    {"type": "item.completed", "item": {"id": "item_3", "type": "agent_message", "text": "Environment ready."}},
    {"type": "turn.completed", "usage": {"input_tokens": 90000, "cached_input_tokens": 0, "output_tokens": 10000}},
)
CHAT = lines(
    {"type": "message", "role": "system", "content": "You are a helpful assistant that can run bash."},
    {"type": "message", "role": "user", "content": "Set up the environment."},
    {"type": "message", "role": "assistant", "content": "Let me look.", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": "ls"})}}]},
    {"type": "message", "role": "tool", "tool_call_id": "call_1", "content": "README.md setup.py", "extra": {"returncode": 0}},
    {"type": "message", "role": "assistant", "content": "Done."},
)
COMMANDS = lines(
    {"type": "command", "command": "python -m venv /opt/venv", "exit_code": 0, "output": ""},
    {"type": "command", "command": "/opt/venv/bin/pip install -e .", "exit_code": 1, "output": "error: no setup.py"},
)


def _store(output_dir: Path, row: dict, name: str, data: bytes) -> str:
    rel = f"{artifact_dir(row['sweep_id'], row['trial_id'], row['attempt'])}/{name}.jsonl.gz"
    (output_dir / rel).parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(output_dir / rel, "wb") as f:
        f.write(data)
    return rel


def write_run(output_dir: Path) -> Path:
    """Write the viewer's test run under `output_dir` (module docstring) and return it."""
    output_dir.mkdir(parents=True, exist_ok=True)
    attempts = with_agent_words(fixture_rows(), output_dir)
    attempts.append(trial("frugal", "t7", 0, "FFFF", status="infra_error"))
    kinds = {CLAUDE_TRIAL: ("claude_code", CLAUDE, request_log(CLAUDE_REQUESTS)),
             CODEX_TRIAL: ("codex", CODEX, request_log([(45000, 5000, 0.2), (45000, 5000, 0.2)], refused=0)),
             CHAT_TRIAL: ("mini_swe_agent", CHAT, request_log([(50000, 6000, 0.25), (40000, 4000, 0.15)], refused=0)),
             COMMAND_TRIAL: ("command", COMMANDS, None)}
    out = []
    for row, stages in attempts:
        if row["trial_id"] in kinds:
            kind, transcript, log = kinds[row["trial_id"]]
            row = {**row, "agent_kind": kind, "agent_version": "1.2.3", "trajectory_path": _store(output_dir, row, "trajectory", transcript)}
            if log is not None:
                row.update(llm_log_path=_store(output_dir, row, "llm_requests", log), llm_requests=4,
                           cached_input_tokens=row["input_tokens"] // 2 if row.get("input_tokens") else None)
        if row["trial_id"] == CLAUDE_TRIAL:
            rel = f"{artifact_dir(row['sweep_id'], row['trial_id'], row['attempt'])}/c1.log.gz"
            with gzip.open(output_dir / rel, "wt") as f:
                f.write(STAGE_LOG_TEXT)
            stages = [{**s, "log_path": rel, "log_head": "collecting torch\n", "log_tail": "C1 done\n",
                       "output_truncated": True} if s["stage"] == "c1" else s for s in stages]
        if row["trial_id"] == HEURISTIC_TRIAL:
            log_rel = _store(output_dir, row, "agent", HEURISTIC_OUTPUT.encode())
            manifest = _store(output_dir, row, "env_manifest", json.dumps(
                {"commands": {"source": "agent_log", "list": MANIFEST_COMMANDS}}).encode())
            row = {**row, "agent_kind": "heuristic", "agent_version": None, "trajectory_path": None,
                   "agent_output_tail": HEURISTIC_OUTPUT, "agent_log_path": log_rel, "env_manifest_path": manifest,
                   "env_manifest_digest": "ab" * 32, "env_manifest_bytes": 123, "env_keep_policy": "successes",
                   "env_kept": True, "env_image_id": "sha256:" + "c" * 64, "env_image_tag": "reb-ray/env:syn-weak",
                   "env_image_bytes": 28_672, "env_image_total_bytes": 300_000_000, "c0_unowned": 2,
                   "c0_unowned_modules": ["fakepkg", "fakepkg.sub"], "python_path_kind": "venv",
                   "startup_hooks": ["/opt/envs/heuristic/lib/python3.11/site-packages/x.pth"],
                   "suspicious_actions": ["pip install --no-deps fakepkg"]}
            agent = {k: row[k] for k in ("sweep_id", "trial_id", "attempt", "task_id", "agent")}
            stages = [s for s in stages if s["stage"] != "agent"] + [
                {**agent, "stage": "agent", "status": "success", "exit_code": 0, "log_path": log_rel, "duration_s": 12.5,
                 "log_head": HEURISTIC_OUTPUT, "log_tail": HEURISTIC_OUTPUT, "output_truncated": False}]
        out.append((row, stages))
    return write(output_dir, out)
