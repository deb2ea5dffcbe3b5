"""LLM agents end to end (issue 10, items 5-8): real Docker, real Ray, the real scripted endpoint
and the real metering proxy, driven by small real LLM agents (tests/helpers/scripted_agents.py) that
make their requests from inside the sandbox with the image's python3."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from reb_ray.llm.prices import cost_usd, price_table
from reb_ray.llm.scripted import ScriptedEndpoint, script_from
from reb_ray.llm.usage import Usage
from reb_ray.models.sweep import SweepConfig
from reb_ray.results.read import read_stages, read_trials
from reb_ray.testing.llm_session import REAL_KEY_ENV

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[1]
WHEELS = [Path("/opt/wheels")] if Path("/opt/wheels").is_dir() else []
KEY_ENV = REAL_KEY_ENV  # where the `real_key` fixture puts the key
AGENTS = "tests.helpers.scripted_agents"
REPORT_TURN = {"kind": "message", "text": "Done: the environment is /usr/bin/python3.",
               "usage": {"input_tokens": 2100, "cached_input_tokens": 1900, "cache_write_tokens": 0, "output_tokens": 25}}
# Two tool calls and a final message, with distinct numbers in every field.
SESSION = [
    {"kind": "tool", "command": "echo hi > /tmp/x; cat /tmp/x",
     "usage": {"input_tokens": 1200, "cached_input_tokens": 700, "cache_write_tokens": 300, "output_tokens": 45,
               "reasoning_tokens": 12}},
    {"kind": "tool", "command": "ls /nope",
     "usage": {"input_tokens": 1500, "cached_input_tokens": 1100, "cache_write_tokens": 200, "output_tokens": 31,
               "reasoning_tokens": 7}},
    REPORT_TURN,
]


@pytest.fixture
def endpoints():
    """A factory of running scripted endpoints (stopped after the test)."""
    started = []

    def start(turns: list[dict], model: str = "claude-sonnet-4-5") -> ScriptedEndpoint:
        endpoint = ScriptedEndpoint(script_from({"model": model, "turns": turns})).start()
        started.append(endpoint)
        return endpoint

    yield start
    for endpoint in started:
        endpoint.stop()


def _agent(cls: str, endpoint: ScriptedEndpoint, model: str = "claude-sonnet-4-5", **extra) -> dict:
    return {"kind": f"{AGENTS}:{cls}", "model": model, "base_url": endpoint.url, "key_env": KEY_ENV, **extra}


def _config(tmp_path: Path, agents: dict[str, dict], **overrides) -> SweepConfig:
    values = {"sweep_id": f"test-{uuid.uuid4().hex[:8]}", "output": tmp_path / "runs", "tasks": "numpy-trainer",
              "agents": list(agents), "agent_specs": agents, "wheelhouses": WHEELS, "max_concurrent": 2,
              "llm_retry_backoff_s": 0.5, "llm_retry_backoff_max_s": 2.0, **overrides}
    return SweepConfig(**values)


def _rows(config: SweepConfig) -> list[dict]:
    return sorted(read_trials(config.output.dir, config.resolved_sweep_id()).to_pylist(), key=lambda r: (r["agent"], r["attempt"]))


def _stored_text(output: Path) -> str:
    """Every value of every row and every artifact's content under `output`, as one string."""
    parts = [repr(read_trials(output).to_pylist()), repr(read_stages(output).to_pylist())]
    for path in output.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            parts.append((gzip.decompress(data) if path.suffix == ".gz" else data).decode(errors="replace"))
    return "\n".join(parts)


#: Endpoint scripts of the agents that share one sweep (`shared`): the spy's priced session, the
#: same session through Chat Completions with a model the price table lacks, a 429 storm, a
#: 402 budget refusal, a key refused with 401 on every request, a trial that reaches its own
#: cost limit. Their sweep-wide settings are the same; max_attempts is the storm's (four attempts).
#: The agent timeout, the sweep's cost budget and the network policy are sweep-wide: those tests
#: run sweeps of their own.
SHARED_ENDPOINTS = {
    "spy": (SESSION, "claude-sonnet-4-5", "LlmSpyAgent", {}),
    "chat": (SESSION, "no-such-model-7", "LlmChatAgent", {}),
    "storm": ([{"kind": "error", "status": 429, "retry_after_s": 1, "repeat": 3}, *SESSION], "claude-sonnet-4-5",
              "LlmScriptAgent", {}),
    "broke": ([{"kind": "error", "status": 402, "message": "budget exceeded for this key"}, *SESSION],
              "claude-sonnet-4-5", "LlmScriptAgent", {}),
    "refused": ([{"kind": "error", "status": 401, "message": "invalid x-api-key", "repeat": 100}], "claude-sonnet-4-5",
                "LlmPersistentAgent", {}),
    "costly": ([{"kind": "tool", "command": "true", "usage": {"input_tokens": 10000, "output_tokens": 10}}, *SESSION],
               "claude-sonnet-4-5", "LlmScriptAgent", {"max_cost_usd": 0.01}),
}


@pytest.fixture(scope="module")
def shared(tmp_path_factory, sandbox_image, ray_local):
    """One sweep of the SHARED_ENDPOINTS agents on numpy-trainer, each against its own scripted
    endpoint, the real key in the driver's environment while it runs (as `real_key` puts it):
    (config, result, {agent: rows by attempt}, {agent: endpoint})."""
    from reb_ray.sweep.run import run_sweep
    from reb_ray.testing.llm_session import REAL_KEY

    started = {}
    try:
        for name, (turns, model, _, _) in SHARED_ENDPOINTS.items():
            started[name] = ScriptedEndpoint(script_from({"model": model, "turns": turns})).start()
        agents = {name: _agent(cls, started[name], model=model, **extra)
                  for name, (_, model, cls, extra) in SHARED_ENDPOINTS.items()}
        config = _config(tmp_path_factory.mktemp("llm-shared"), agents, max_attempts=4)
        with pytest.MonkeyPatch.context() as env:
            env.setenv(KEY_ENV, REAL_KEY)
            result = run_sweep(config, show_progress=False)
        rows: dict[str, list[dict]] = {}
        for row in _rows(config):
            rows.setdefault(row["agent"], []).append(row)
        yield config, result, rows, started
    finally:
        for endpoint in started.values():
            endpoint.stop()


def test_tokens_cost_and_the_real_key_stays_out_of_the_sandbox(shared, real_key):
    """The proxy's token columns equal the script's sums and cost the price table's arithmetic;
    the CLI's own figures agree; the same session through another API with a model the table
    lacks fills the same token columns and leaves cost null (F17). The real key reaches the
    endpoint (the proxy swapped it in) and never the sandbox (its files, every process's
    environment) nor any row or artifact (of any agent of the shared sweep)."""
    config, result, rows, endpoints = shared
    (spy,), (chat,) = rows["spy"], rows["chat"]
    priced = endpoints["spy"]
    assert result.attempts == sum(len(attempts) for attempts in rows.values())

    total = script_from({"turns": SESSION}).total_usage()
    assert (total.input_tokens, total.cached_input_tokens, total.cache_write_tokens) == (4800, 3700, 500)
    assert spy["status"] == "scored" and spy["report_status"] == "ok", spy["failure_reason"]
    assert spy["llm_requests"] == 3 and spy["llm_rate_limited"] == 0
    # Under the default open policy the sandbox sat on reb-ray-open behind the host guard, and
    # reached the node's LLM proxy on its gateway (inside the port range the guard opens).
    assert (spy["network_policy"], spy["sandbox_network"], spy["network_host_guard"]) == ("open", "reb-ray-open", True)
    # Anthropic reports no reasoning count: unknown, not 0.
    assert [spy[f] for f in ("input_tokens", "cached_input_tokens", "cache_write_tokens", "output_tokens",
                             "reasoning_tokens")] == [4800, 3700, 500, 101, None]
    # claude-sonnet-4-5: $3 input, $0.30 cached, $3.75 cache write, $15 output per million tokens.
    by_hand = (600 * 3.00 + 3700 * 0.30 + 500 * 3.75 + 101 * 15.00) / 1e6
    assert spy["cost_usd"] == pytest.approx(by_hand) and spy["cost_source"] == "price_table"
    assert spy["cost_usd"] == pytest.approx(cost_usd("claude-sonnet-4-5", Usage(4800, 3700, 500, 101, None))[0])
    assert spy["price_version"] == price_table().version and spy["llm_model"] == "claude-sonnet-4-5"
    assert (spy["agent_reported_input_tokens"], spy["agent_reported_output_tokens"]) == (4800, 101)

    # Chat Completions has no cache writes but reports reasoning; the model has no price.
    assert chat["status"] == "scored" and chat["report_status"] == "ok", chat["failure_reason"]
    assert [chat[f] for f in ("llm_requests", "input_tokens", "cached_input_tokens", "cache_write_tokens",
                              "output_tokens", "reasoning_tokens")] == [3, 4800, 3700, None, 101, 19]
    assert chat["cost_usd"] is None and chat["cost_source"] == "unknown"
    assert (chat["agent_reported_input_tokens"], chat["agent_reported_output_tokens"]) == (4800, 101)

    # The key the endpoint saw was the real one (the proxy swapped the stand-in for it).
    assert priced.session(real_key) is not None and priced.session(real_key)["position"] == 3
    log = gzip.decompress((config.output.dir / spy["agent_log_path"]).read_bytes()).decode()
    assert "--- spy done" in log and "spy: FOUND" not in log
    assert "REB_LLM_KEY=sk-rebray-" in log  # the sandbox held the stand-in key, and only that
    assert real_key not in _stored_text(config.output.dir)
    assert spy["trajectory_path"].endswith("trajectory.jsonl.gz") and spy["llm_log_path"].endswith("llm_requests.jsonl.gz")

    shown = subprocess.run([sys.executable, "-c", "from reb_ray.cli import main; main()", "trial", "show",
                            str(config.output.dir), spy["trial_id"]], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert "$ echo hi > /tmp/x; cat /tmp/x" in text and "exit 0  hi" in text
    assert "$ ls /nope" in text and "exit 2" in text  # the failed command, with its exit code
    assert "input 4800 (cached 3700, cache write 500), output 101" in text
    assert f"${by_hand:.6f} (price_table" in text and '"python_path": "/usr/bin/python3"' in text
    assert "c1         failure   deps" in text  # stage results with their category
    listing = text[text.index("files    "):]  # every log of the attempt, the stages' too
    assert f"file(s) of attempt 1, paths under {config.output.dir}:" in listing and f"{spy['llm_log_path']} (" in listing and "(missing)" not in listing
    assert "c1 log" in listing and f"{spy['trajectory_path']} (" in listing


def test_a_429_storm_ends_as_infra_rows_then_one_scored_row(shared):
    """F16: the endpoint answers 429 to the first 3 requests of the session; the agent gives up
    at each. Three `infra_llm_rate_limit` rows (never scored), retried after a backoff, then one
    scored row."""
    rows = shared[2]["storm"]
    assert [(r["attempt"], r["status"], r["failure_category"]) for r in rows[:3]] == [
        (n, "infra_error", "infra_llm_rate_limit") for n in (1, 2, 3)]
    for r in rows[:3]:
        assert r["failure_owner"] == "infra" and r["llm_rate_limited"] == 1 and r["llm_retry_after_s"] == 1.0
        assert r["input_tokens"] == 0 and r["cost_usd"] == 0.0  # a 429 bills nothing
        assert "last LLM request failed (HTTP 429" in r["failure_reason"]
        assert r["c1_status"] is None  # never probed, never scored
    last = rows[3]
    assert (last["attempt"], last["status"], last["report_status"]) == (4, "scored", "ok")
    assert last["llm_rate_limited"] == 0 and last["input_tokens"] == 4800
    # Backoff: each retry waited at least max(0.5 s * 2**(n-1), Retry-After 1 s), capped at 2 s.
    for before, after, wait in zip(rows, rows[1:], (1.0, 1.0, 2.0)):
        assert (after["started_at"] - before["finished_at"]).total_seconds() >= wait * 0.95


def test_an_exhausted_budget_is_infra_never_retried_never_scored(shared):
    """F16: a 402 "budget exceeded" from the upstream is `infra_llm_budget`: one attempt of the
    sweep's four, no retry."""
    rows = shared[2]["broke"]
    assert len(rows) == 1
    assert (rows[0]["status"], rows[0]["failure_owner"], rows[0]["failure_category"]) == (
        "infra_error", "infra", "infra_llm_budget")
    assert rows[0]["llm_budget_failures"] == 1 and "budget exceeded" in rows[0]["llm_last_error"]


def test_a_refused_key_ends_the_agent_phase_in_seconds_never_retried(shared, real_key):
    """F16: the endpoint answers 401 to every request and the agent would keep retrying for about
    3 minutes. The first refusal ends the agent phase within seconds (the proxy answers the
    agent's later requests itself, the trial kills the agent): one `infra_llm_auth` row, never
    retried, and the endpoint saw one request."""
    [row] = shared[2]["refused"]
    assert (row["status"], row["failure_owner"], row["failure_category"]) == ("infra_error", "infra", "infra_llm_auth")
    assert "refused the trial's key (HTTP 401: invalid x-api-key)" in row["failure_reason"]
    assert row["agent_wall_time_s"] < 20, row["agent_wall_time_s"]  # one retry is 15 s: at most the first
    assert shared[3]["refused"].session(real_key)["position"] == 1  # the later requests never left the proxy
    assert row["llm_auth_failures"] == row["llm_requests"] >= 1


def test_a_hanging_endpoint_hits_the_agent_timeout_and_the_row_says_so(tmp_path, sandbox_image, ray_local, real_key,
                                                                      endpoints):
    """F15b for LLM agents: the endpoint never answers; the agent's own time limit fires. That is
    the agent's (scored), the row names the limit, and the request left unanswered is counted."""
    from reb_ray.sweep.run import run_sweep

    hang = endpoints([{"kind": "hang"}])
    config = _config(tmp_path, {"llm": _agent("LlmScriptAgent", hang)}, agent_timeout_s=4)
    run_sweep(config, show_progress=False)
    [row] = _rows(config)
    assert (row["status"], row["failure_owner"], row["agent_limit"]) == ("scored", "agent", "agent_timeout_s=4")
    assert row["agent_timed_out"] is True and row["report_status"] == "missing_report"
    assert row["llm_requests"] == 1 and row["llm_in_flight"] == 0  # cut off by the agent's end, then recorded
    assert row["input_tokens"] is None and row["cost_usd"] is None  # sent, never answered: unknown, not 0
    assert "agent limit agent_timeout_s=4 fired" in row["failure_reason"]


def test_the_per_trial_cost_limit_is_the_agents_limit(shared):
    """The spec's max_cost_usd: once the trial's cost reaches it the proxy refuses further
    requests (402); the agent stops without a report. That is the agent's own limit (scored,
    agent_limit=max_cost_usd=0.01), not an infra budget failure."""
    [row] = shared[2]["costly"]
    assert (row["status"], row["failure_owner"], row["agent_limit"]) == ("scored", "agent", "max_cost_usd=0.01")
    assert row["llm_requests"] == 2 and row["llm_budget_failures"] == 0  # refused by the proxy, not the upstream
    assert row["cost_usd"] == pytest.approx((10000 * 3.00 + 10 * 15.00) / 1e6)


def test_max_cost_usd_stops_launching_and_a_resume_counts_what_was_spent(tmp_path, sandbox_image, ray_local,
                                                                          real_key, endpoints):
    """--max-cost-usd: with one trial at a time and a budget below one trial's cost, the first
    trial runs and the two others are not launched; a resume with the same budget launches
    nothing (the rows record what was spent); a larger budget continues the same sweep."""
    from reb_ray.sweep.run import run_sweep

    # Five tool calls and no final message: the agent runs out of turns, no report (fast probes).
    endless = endpoints([{"kind": "tool", "command": "true", "usage": {"input_tokens": 1000, "output_tokens": 100},
                          "repeat": 100}])
    agents = {"llm": _agent("LlmScriptAgent", endless)}
    per_trial = 5 * (1000 * 3.00 + 100 * 15.00) / 1e6  # $0.0225
    config = _config(tmp_path, agents, trials=3, max_concurrent=1, max_cost_usd=0.01)
    first = run_sweep(config, show_progress=False)
    assert (first.attempts, first.not_launched) == (1, 2)
    assert first.budget.spent_usd == pytest.approx(per_trial)
    [row] = _rows(config)
    assert row["sweep_max_cost_usd"] == 0.01 and row["cost_usd"] == pytest.approx(per_trial)

    again = run_sweep(config, show_progress=False)
    assert (again.attempts, again.not_launched) == (0, 2)

    more = run_sweep(config.updated(max_cost_usd=0.04), show_progress=False)
    assert more.sweep_id == first.sweep_id  # the budget is not part of the sweep's identity
    assert (more.attempts, more.not_launched) == (1, 1)  # $0.0225 spent + one more trial reaches $0.04
    assert len(_rows(config)) == 2


def test_an_llm_agent_under_the_registries_network_policy(tmp_path, sandbox_image, ray_local, real_key, endpoints):
    """Issue 11 item 4: with `--network-policy registries` the agent still reaches its model
    through the node's LLM proxy (on the internal network's gateway), its commands download
    from PyPI through the egress proxy, and a host off the allow-list is refused and counted."""
    from reb_ray.sweep.run import run_sweep

    fetch = ("pip download -q --no-deps --no-cache-dir -d /tmp/dl six==1.16.0 && echo PIP-OK; python3 -c \"import "
             "urllib.request as u; u.urlopen('https://example.com/', timeout=10)\" 2>&1 | tail -1")
    session = endpoints([{"kind": "tool", "command": fetch, "usage": {"input_tokens": 1000, "output_tokens": 20}},
                         REPORT_TURN])
    config = _config(tmp_path, {"llm": _agent("LlmScriptAgent", session)}, network_policy="registries")
    run_sweep(config, show_progress=False)
    [row] = _rows(config)
    assert row["status"] == "scored" and row["report_status"] == "ok", row["failure_reason"]
    assert row["llm_requests"] == 2 and row["input_tokens"] == 1000 + 2100 and row["llm_failure_category"] is None
    assert row["network_policy"] == "registries" and row["network_denied_count"] == 1
    commands = [json.loads(line) for line in gzip.decompress((config.output.dir / row["trajectory_path"]).read_bytes())
                .decode().splitlines() if '"command"' in line and '"exit_code"' in line]
    assert "PIP-OK" in commands[0]["output"] and "Tunnel connection failed: 403" in commands[0]["output"]
    log = gzip.decompress((config.output.dir / row["network_log_path"]).read_bytes()).decode()
    assert '"host": "example.com", "port": 443, "decision": "denied"' in log
