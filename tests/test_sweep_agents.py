"""The real pinned CLIs end to end (issue 10, item 10) at sweep level: real Docker, real Ray,
codex, claude_code and mini_swe_agent from the node's toolchain, each against its own real
scripted endpoint through the real metering proxy, on the demo task numpy-trainer.

The scripted sessions are the agent-level tests' (tests/agents/): built there, imported here.
Two sweeps in all (each costs sandboxes and probes): one with the three kinds solving the task,
a false claim and a 429 storm; one with a hanging endpoint and a short agent timeout."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from reb_ray.agents.toolchain import PINS
from reb_ray.llm.apis import ANTHROPIC, CHAT, RESPONSES
from reb_ray.llm.prices import cost_usd
from reb_ray.llm.scripted import ScriptedEndpoint, script_from
from reb_ray.llm.usage import FIELDS, REPORTED_FIELDS
from reb_ray.models.sweep import SweepConfig
from reb_ray.results.read import read_trials
from reb_ray.testing.llm_session import REAL_KEY_ENV, REPORT as CODEX_REPORT, VENV, build_script
from tests.agents.test_mini_swe_agent import SUBMIT, WRITE_REPORT, build_turns
from tests.test_sweep_llm import _stored_text

pytestmark = [pytest.mark.docker, pytest.mark.agent_cli]

WHEELS = [Path("/opt/wheels")] if Path("/opt/wheels").is_dir() else []
KEY_ENV = REAL_KEY_ENV  # where the `real_key` fixture puts the key
CODEX, CLAUDE, MINI = "gpt-5.1-codex", "claude-sonnet-4-5", "gpt-5-mini"
#: The API each kind speaks (what its proxy columns can carry).
API = {"codex": RESPONSES, "claude_code": ANTHROPIC, "mini_swe_agent": CHAT}
#: A report that claims what this GPU-less machine lacks, and a torch that is not installed.
FALSE_CLAIM = {**CODEX_REPORT, "torch_version": "2.5.1", "cuda_available": True, "gpu_count": 2,
               "ddp_expected_ok": True, "notes": "claims a GPU and torch"}
#: The liar's last message: the report as indented JSON, as a model prints one. This trial is
#: also the claude_code runner's forcing of a report from the result text (it was a second session
#: of the same CLI with the same ending, tests/agents/test_claude_code.py).
LIAR_FINAL = {"kind": "message", "text": f"Done. The report:\n{json.dumps(FALSE_CLAIM, indent=2)}\n"}
#: 429s in a row: more than codex's own retries of one request, so the first attempt ends on one.
STORM = 8


@pytest.fixture
def endpoints():
    """start(script) -> a running scripted endpoint (one per agent: the session is per key)."""
    started = []

    def start(script: dict) -> ScriptedEndpoint:
        started.append(ScriptedEndpoint(script_from(script)).start())
        return started[-1]

    yield start
    for endpoint in started:
        endpoint.stop()


def _spec(kind: str, model: str, endpoint: ScriptedEndpoint) -> dict:
    return {"kind": kind, "model": model, "base_url": endpoint.url, "key_env": KEY_ENV}


def _config(tmp_path: Path, agents: dict[str, dict], **overrides) -> SweepConfig:
    values = {"sweep_id": f"test-{uuid.uuid4().hex[:8]}", "output": tmp_path / "runs", "tasks": "numpy-trainer",
              "agents": list(agents), "agent_specs": agents, "wheelhouses": WHEELS, "max_concurrent": 3,
              "llm_retry_backoff_s": 0.5, "llm_retry_backoff_max_s": 2.0, **overrides}
    return SweepConfig(**values)


def _rows(config: SweepConfig) -> dict[str, list[dict]]:
    rows: dict[str, list[dict]] = {}
    for row in sorted(read_trials(config.output.dir, config.resolved_sweep_id()).to_pylist(), key=lambda r: r["attempt"]):
        rows.setdefault(row["agent"], []).append(row)
    return rows


def _expected(script: dict, kind: str) -> dict:
    """The script's sums as the kind's API carries them (None where it cannot)."""
    return script_from(script).total_usage().only(REPORTED_FIELDS[API[kind]]).as_dict()


def _check_atif(output: Path, row: dict) -> None:
    """The attempt's trajectory.json conforms, its totals are the row's, and every model request
    stands on a step with its tokens and cost (claude and mini-swe-agent: one per model turn;
    codex, whose events mark no turns: by the events' arrival times, its polls of a running
    command on that command's step), summing to the row's."""
    from reb_ray.llm.atif import validate

    doc = json.loads((output / row["atif_path"]).read_text())
    assert validate(doc) == [], row["agent"]
    final = doc["final_metrics"]
    assert (final["total_prompt_tokens"], final["total_completion_tokens"], final["total_cost_usd"]) == (
        row["input_tokens"], row["output_tokens"], row["cost_usd"])
    calls = [c for s in doc["steps"] for c in s.get("tool_calls") or []]
    assert any("venv" in json.dumps(c["arguments"]) for c in calls), row["agent"]  # the script's commands are steps
    metered = [s["metrics"] for s in doc["steps"] if "metrics" in s]
    requests = sum((m.get("extra") or {}).get("model_requests", 1) for m in metered)  # codex's polls join a step
    assert requests == row["llm_requests"], (row["agent"], doc["extra"].get("metrics_attribution"))
    assert sum(m["prompt_tokens"] for m in metered) == row["input_tokens"]
    assert sum(m["completion_tokens"] for m in metered) == row["output_tokens"]
    assert sum(m["cost_usd"] for m in metered) == pytest.approx(row["cost_usd"])


def test_three_real_clis_solve_the_task_a_false_claim_is_caught_and_a_429_storm_is_infra(
        tmp_path, sandbox_image, installed_toolchain, ray_local, real_key, endpoints):  # noqa: F811
    from reb_ray.sweep.run import run_sweep

    scripts = {
        "codex": ("codex", CODEX, build_script(CODEX)),
        "claude": ("claude_code", CLAUDE, build_script(CLAUDE)),
        "mini": ("mini_swe_agent", MINI, {"model": MINI, "turns": build_turns([WRITE_REPORT, SUBMIT])}),
        # The venv is real; the report (forced from the last message, JSON over several lines)
        # claims a GPU and torch.
        "liar": ("claude_code", CLAUDE, build_script(CLAUDE, write_report=False, final=LIAR_FINAL)),
    }
    storm_script = build_script(CODEX)
    storm_script["turns"].insert(0, {"kind": "error", "status": 429, "retry_after_s": 1, "repeat": STORM})
    scripts["storm"] = ("codex", CODEX, storm_script)
    served = {name: endpoints(script) for name, (_, _, script) in scripts.items()}
    agents = {name: _spec(kind, model, served[name]) for name, (kind, model, _) in scripts.items()}
    config = _config(tmp_path, agents, max_attempts=4)
    run_sweep(config, show_progress=False)
    rows = _rows(config)

    for name in ("codex", "claude", "mini"):
        kind, model, script = scripts[name]
        [row] = rows[name]
        assert (row["status"], row["report_status"], row["c1_status"]) == ("scored", "ok", "success"), (
            row["failure_reason"], row["agent_output_tail"])
        assert row["report_source"] == "agent_file" and row["agent_limit"] is None
        assert row["c0_missing"] == 0, name  # the probes found all the CLI built (the runner tests rely on this)
        assert (row["c5_capability"], row["c5_version"]) == (0, 0)  # an honest report
        assert row["agent_kind"] == kind and row["agent_version"] == PINS[kind].version
        # The proxy's token columns are the script's sums (what the kind's API carries).
        expected = _expected(script, kind)
        assert {f: row[f] for f in FIELDS} == expected, name
        # Every request the endpoint answered, counted once: the script's turns, and codex's polls
        # of a command still running (more of them the slower the machine; they carry no usage).
        answered = [r for s in served[name].state()["sessions"].values() for r in s["requests"]]
        assert sum(r["turn"] is not None for r in answered) == len(script["turns"]), name
        assert row["llm_requests"] == len(answered) and row["llm_rate_limited"] == 0, name
        # Cost: the price table's arithmetic on those sums.
        assert row["cost_source"] == "price_table" and row["llm_model"] == model
        assert row["cost_usd"] == pytest.approx(cost_usd(model, script_from(script).total_usage().only(
            REPORTED_FIELDS[API[kind]]))[0])
        # The CLI's own figures agree with the proxy's.
        assert (row["agent_reported_input_tokens"], row["agent_reported_output_tokens"]) == (
            row["input_tokens"], row["output_tokens"]), name
        if row["agent_reported_cost_usd"] is not None:  # claude's list price, litellm's: the same as ours
            assert row["agent_reported_cost_usd"] == pytest.approx(row["cost_usd"], rel=1e-3), name
        _check_atif(config.output.dir, row)
    # claude-sonnet-4-5 by hand: $3 input, $0.30 cached, $3.75 cache write, $15 output per million.
    claude = rows["claude"][0]
    assert (claude["input_tokens"], claude["cached_input_tokens"], claude["cache_write_tokens"],
            claude["output_tokens"]) == (8800, 6100, 700, 133)
    assert claude["cost_usd"] == pytest.approx((2000 * 3.00 + 6100 * 0.30 + 700 * 3.75 + 133 * 15.00) / 1e6)

    # The false claim: a real venv (C1 passes) but C5 catches the torch that is not installed.
    # The GPU and CUDA claims are inconclusive, not lies: the demo suite is CPU-only, so the CUDA
    # stage never ran (a stage that did not run never gives a silent verdict, grading/c5.py).
    [liar] = rows["liar"]
    assert (liar["status"], liar["report_source"], liar["report_status"]) == ("scored", "forced_from_output", "ok")
    assert liar["c1_status"] == "success" and liar["c5_status"] == "success"  # the facts probe ran
    assert liar["agent_exit_code"] == 0 and liar["report_python_path"] == FALSE_CLAIM["python_path"]
    assert liar["c5_report_faults"] == 0  # every key of the contract read back, of its type
    assert (liar["c5_path"], liar["c5_version"], liar["c5_capability"]) == (0, 1, 0), liar["failure_reason"]

    # The 429 storm: infra rows (never scored, never probed), then one scored row.
    storm = rows["storm"]
    assert len(storm) >= 2, [(r["status"], r["failure_category"]) for r in storm]
    for row in storm[:-1]:
        assert (row["status"], row["failure_owner"], row["failure_category"]) == (
            "infra_error", "infra", "infra_llm_rate_limit"), row["failure_reason"]
        assert row["llm_rate_limited"] >= 1 and row["c1_status"] is None
    last = storm[-1]
    assert (last["status"], last["report_status"], last["c1_status"]) == ("scored", "ok", "success"), (
        last["failure_reason"], last["agent_output_tail"])
    assert sum(r["llm_rate_limited"] for r in storm) == STORM  # every 429 counted, once
    assert last["input_tokens"] == rows["codex"][0]["input_tokens"]  # a 429 bills nothing

    # The real key: swapped in by the proxy (the endpoint saw it), in no row, stage or artifact.
    stored = _stored_text(config.output.dir)
    assert real_key not in stored and f"{VENV}/bin/python" in stored


def test_a_hanging_endpoint_hits_the_agent_timeout_and_the_row_says_so(
        tmp_path, sandbox_image, installed_toolchain, ray_local, real_key, endpoints):  # noqa: F811
    """Also the claude_code runner's own timeout test (it was a second session of the same CLI
    against the same hang, tests/agents/test_claude_code.py): the row's agent columns are the
    runner's `AgentRun` as it returned it (trial/agent_phase.py copies them unchanged)."""
    from reb_ray.sweep.run import run_sweep

    hang = endpoints({"model": CLAUDE, "turns": [{"kind": "hang"}]})
    config = _config(tmp_path, {"hang": _spec("claude_code", CLAUDE, hang)}, agent_timeout_s=8)
    run_sweep(config, show_progress=False)
    [row] = _rows(config)["hang"]
    assert (row["status"], row["failure_owner"], row["agent_limit"]) == ("scored", "agent", "agent_timeout_s=8")
    assert row["agent_timed_out"] is True and row["report_status"] == "missing_report"
    assert row["llm_requests"] >= 1 and row["input_tokens"] is None and row["cost_usd"] is None
    # The runner: the CLI was killed (a non-zero or unknown exit) once the limit had elapsed, not
    # before, and well within it plus the runner's reserve; no report, from the agent or forced.
    assert row["agent_exit_code"] != 0 and 8 <= row["agent_wall_time_s"] < 8 + 40, row["agent_wall_time_s"]
    assert row["report_source"] == "none"
    # The hang was reached: the CLI was waiting on the model when the limit fired.
    [seen] = hang.state()["sessions"].values()
    assert len(seen["requests"]) >= 1 and seen["position"] == 1, seen
    assert real_key not in _stored_text(config.output.dir)
