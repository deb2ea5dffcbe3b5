"""Harbor tasks through `reb-ray sweep --suite harbor:PATH`: real Ray, real Docker, one sweep.

Three Harbor tasks written by the test, built from the reb-ray sandbox image (no registry needed;
`silent` and `pair` name an unreachable registry's image, which the sweep's `image_map` maps):
`tiny` (its oracle writes the answer, its test.sh writes a JSON reward of two metrics), `silent`
(no solution; its test.sh writes no reward) and `pair` (asks for two GPUs, which this machine
has none of). Three agents: `reference` (Harbor's oracle), `noop` and a `command` agent that
writes the answer from the task's working directory and keeps the instruction it was given.
The one sweep's rows are read by every test here; a second identical sweep must run nothing.

The real Claude Code, Codex and mini-swe-agent CLIs run `offline` (tiny without network) in a sweep of its own
on the same Ray, each against its own scripted endpoint behind the real metering proxy: an
endpoint keeps one script session per key that reaches it, and the proxy hands it the one real
key of every trial of the agent, so the agent's trials of two tasks would share one script.
"""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path

import pytest

from reb_ray.models.sweep import SweepConfig
from reb_ray.testing.llm_session import REAL_KEY, REAL_KEY_ENV
from tests.agents.test_mini_swe_agent import SUBMIT
from tests.harbor.test_harbor_e2e import write_tiny_task
from tests.helpers.shared_runs import ray_for_one_sweep, unique_sweep_id

#: The `FROM` of `silent` and `pair`: no registry answers here; the sweep maps it to the sandbox image.
UNREACHABLE = "registry.invalid/harbor/base:1"
COMMAND = 'printf "%s" "$REB_RAY_INSTRUCTION" > seen_instruction; echo 42 > answer'


def write_tasks(root: Path, image: str) -> Path:
    tasks = root / "tasks"
    write_tiny_task(tasks, image)
    for name, extra in (("silent", ""), ("pair", "gpus = 2\n")):
        task = tasks / name
        (task / "environment").mkdir(parents=True)
        (task / "tests").mkdir()
        (task / "task.toml").write_text(f'version = "1.0"\n[verifier]\ntimeout_sec = 60.0\n[environment]\n{extra}')
        (task / "instruction.md").write_text("Do nothing in particular.\n")
        # a base image of a registry this machine cannot reach, built from the sweep's image_map
        (task / "environment" / "Dockerfile").write_text(f"FROM {UNREACHABLE}\nUSER root\nWORKDIR /app\n")
        (task / "tests" / "test.sh").write_text("#!/bin/sh\necho no reward here\n")
    return tasks


CLAUDE, CODEX, MINI = "claude-sonnet-4-5", "gpt-5.1-codex", "gpt-5-mini"
#: What the CLI's one command prints: the files and the environment variables holding the real
#: key (by a pattern that does not match its own text), and whether a host outside answers.
LOOK = ("echo 42 > answer; echo \"key-files:[$(grep -rlsE --exclude-dir=reb-ray-agent 'sk-REALKEY-[0-9a-f]{8}' /app /root /tmp /etc /opt /logs "
        "/home /var /.reb-ray-agent)]\"; echo \"key-env:$(env | grep -cE 'sk-REALKEY-[0-9a-f]{8}')\"; "
        "r=blocked; python3 -c \"import socket; socket.create_connection(('1.1.1.1', 80), timeout=3)\" 2>/dev/null "
        "&& r=reached; echo \"outside=$r\"")


def cli_script(model: str, kind: str) -> dict:
    """One command (LOOK), then the final message (mini-swe-agent's: its submit command);
    distinct usage numbers in every field."""
    final = {"kind": "tool", "command": SUBMIT} if kind == "mini_swe_agent" else {
        "kind": "message", "text": "The answer is in /app/answer."}
    return {"model": model, "turns": [
        {"kind": "tool", "command": LOOK, "text": "Writing the answer.",
         "usage": {"input_tokens": 2300, "cached_input_tokens": 900, "cache_write_tokens": 400, "output_tokens": 61,
                   "reasoning_tokens": 17}},
        {**final, "usage": {"input_tokens": 3100, "cached_input_tokens": 2200, "cache_write_tokens": 300,
                            "output_tokens": 43, "reasoning_tokens": 9}},
    ]}


#: The CLI agents of the offline sweep: name -> (kind, model).
CLIS = {"claude": ("claude_code", CLAUDE), "codex": ("codex", CODEX), "mini": ("mini_swe_agent", MINI)}


def write_offline_task(root: Path, image: str) -> Path:
    """`tiny` with `network_mode = "no-network"`, named `offline`."""
    task = write_tiny_task(root, image)
    toml = (task / "task.toml").read_text().replace("[environment]\n", '[environment]\nnetwork_mode = "no-network"\n')
    (task / "task.toml").write_text(toml)
    return task.rename(root / "offline")


def cli_sweep(base: Path, image: str) -> tuple[SweepConfig, dict, dict]:
    """One trial of `offline` per CLI agent (CLIS), each against its own scripted endpoint:
    (config, {agent: its rows by attempt}, {agent: its endpoint's state}). The real key is in
    this process's environment only (the driver's)."""
    from reb_ray.llm.scripted import ScriptedEndpoint, script_from
    from reb_ray.results.read import read_trials
    from reb_ray.sweep.run import run_sweep

    write_offline_task(base / "claude-tasks", image)
    endpoints = {name: ScriptedEndpoint(script_from(cli_script(model, kind))).start() for name, (kind, model) in CLIS.items()}
    try:
        with pytest.MonkeyPatch.context() as env:
            env.setenv(REAL_KEY_ENV, REAL_KEY)
            specs = {name: {"kind": kind, "model": model, "base_url": endpoints[name].url, "key_env": REAL_KEY_ENV}
                     for name, (kind, model) in CLIS.items()}
            config = SweepConfig(suite=f"harbor:{base / 'claude-tasks'}", agents=list(CLIS), agent_specs=specs,
                                 sweep_id=unique_sweep_id(), output=base / "claude-runs", max_concurrent=2,
                                 keep_environments="none")
            run_sweep(config, show_progress=False)
        rows: dict[str, list[dict]] = {}
        for row in sorted(read_trials(config.output.dir).to_pylist(), key=lambda r: r["attempt"]):
            rows.setdefault(row["agent"], []).append(row)
        return config, rows, {name: endpoint.state() for name, endpoint in endpoints.items()}
    finally:
        for endpoint in endpoints.values():
            endpoint.stop()


@pytest.fixture(scope="module")
def harbor_sweep(tmp_path_factory, sandbox_image, installed_toolchain):
    from reb_ray.results.read import read_stages, read_trials
    from reb_ray.sweep.run import run_sweep

    base = tmp_path_factory.mktemp("harbor-sweep")
    suite = f"harbor:{write_tasks(base, sandbox_image)}"
    config = SweepConfig(suite=suite, agents=["reference", "noop", "echo"],
                         agent_specs={"echo": {"kind": "command", "command": ["sh", "-c", COMMAND]}},
                         sweep_id=unique_sweep_id(), output=base / "runs", max_concurrent=2, keep_environments="none",
                         image_map={UNREACHABLE: sandbox_image})
    with ray_for_one_sweep():
        result = run_sweep(config, show_progress=False)
        again = run_sweep(config, show_progress=False)
        clis = cli_sweep(base, sandbox_image)
    rows = {(r["agent"], r["task_id"]): r for r in read_trials(config.output.dir).to_pylist()}
    stages = {(r["agent"], r["task_id"], r["stage"]): r for r in read_stages(config.output.dir).to_pylist()}
    return config, result, again, rows, stages, clis


def test_rewards_and_failure_owners_are_columns_of_the_rows(harbor_sweep):
    config, result, _, rows, _, _ = harbor_sweep
    assert (result.attempts, result.scored, result.infra_errors) == (9, 9, 0)
    oracle, noop, echo = rows["reference", "tiny"], rows["noop", "tiny"], rows["echo", "tiny"]
    assert (oracle["status"], oracle["failure_owner"], oracle["reward"]) == ("scored", None, 1.0)
    assert json.loads(oracle["rewards"]) == {"agent_saw_tests": 0.0, "reward": 1.0}  # tests/ came after the agent
    assert (noop["reward"], noop["failure_owner"], noop["cost_usd"]) == (0.0, None, 0.0)
    assert (echo["reward"], echo["agent_exit_code"], echo["cost_usd"]) == (1.0, 0, None)  # a command's cost is unknown
    assert oracle["suite"] == config.suite and oracle["harbor_image"].startswith("reb-ray/harbor-env:tiny-")
    assert all(r["trial_identity"] for r in rows.values())
    silent = rows["noop", "silent"]
    assert (silent["status"], silent["failure_owner"], silent["failure_category"], silent["reward"]) == \
        ("scored", "agent", "reward_missing", None)
    assert rows["reference", "silent"]["failure_category"] == "no_solution"
    assert silent["harbor_image"].startswith("reb-ray/harbor-env:silent-")  # built FROM the mapped image
    for agent in ("reference", "noop", "echo"):
        pair = rows[agent, "pair"]
        assert (pair["status"], pair["failure_owner"], pair["failure_category"], pair["reward"]) == \
            ("scored", "hardware", "insufficient_hardware", None)


def test_reward_columns_spread_every_metric(harbor_sweep):
    from reb_ray.results.read import read_trials, reward_columns

    config = harbor_sweep[0]
    table = reward_columns(read_trials(config.output.dir))
    by_trial = dict(zip(table.column("trial_id").to_pylist(), table.column("reward_agent_saw_tests").to_pylist()))
    assert by_trial["reference/tiny/0"] == 0.0 and by_trial["noop/pair/0"] is None


def test_the_stage_rows_keep_the_verifier_and_the_agents_logs(harbor_sweep):
    import gzip

    config, _, _, _, stages, _ = harbor_sweep
    verifier = stages["reference", "tiny", "verifier"]
    assert (verifier["status"], verifier["exit_code"], verifier["command"]) == ("success", 0, "/tests/test.sh")
    assert json.loads(verifier["raw"])["reward"] == 1
    assert "answer=42" in gzip.open(config.output.dir / verifier["log_path"]).read().decode()
    echo_agent = stages["echo", "tiny", "agent"]
    assert echo_agent["status"] == "success" and echo_agent["exit_code"] == 0
    assert stages["noop", "silent", "verifier"]["failure_category"] == "reward_missing"


def test_a_second_identical_sweep_runs_nothing(harbor_sweep):
    _, result, again, _, _, _ = harbor_sweep
    assert (again.sweep_id, again.attempts, again.skipped) == (result.sweep_id, 0, 9)


def test_the_report_shows_mean_reward_per_agent_not_stages(harbor_sweep):
    from tests.cli.in_process import run_cli

    config = harbor_sweep[0]
    done = run_cli("report", str(config.output.dir))
    assert done.returncode == 0, done.stderr
    lines = {line.split()[0]: line for line in done.stdout.splitlines() if line.split()}
    assert "mean reward" in done.stdout and "C0 missing" not in done.stdout
    # reference: tiny 1.0 (silent: no solution, pair: no GPUs); interval over the one task that has a reward
    assert "1.000" in lines["reference"] and "[1.000, 1.000]" in lines["reference"]
    assert "0.000" in lines["noop"] and "1.000" in lines["echo"]


def test_the_report_csv_and_html_hold_the_reward_table(harbor_sweep, tmp_path):
    import csv

    from tests.analysis.html_dom import parse
    from tests.cli.in_process import run_cli

    config, result = harbor_sweep[0], harbor_sweep[1]
    out, page = tmp_path / "summary.csv", tmp_path / "report.html"
    done = run_cli("report", str(config.output.dir), "--csv", str(out), "--html", str(page))
    assert done.returncode == 0, done.stderr
    rows = {r["agent"]: r for r in csv.DictReader(out.open())}
    reference, noop = rows["reference"], rows["noop"]
    # tiny: reward 1 (agent_saw_tests 0); silent: no solution (the agent's); pair: too few GPUs (the hardware's)
    assert (reference["trials"], reference["rewarded"], reference["mean_reward"], reference["reward_agent_saw_tests"]) == \
        ("3", "1", "1.0", "0.0")
    assert (reference["failed_agent"], reference["failed_hardware"], reference["infra_errors"]) == ("1", "1", "0")
    # noop's pair never ran the agent (too few GPUs): its cost is unknown, the other two are 0
    assert (noop["mean_reward"], noop["cost_usd_sum"], noop["cost_valid_jobs"], rows["echo"]["cost_usd_sum"]) == \
        ("0.0", "0.0", "2", "")
    cells = parse(page.read_text(encoding="utf-8")).tables[(result.sweep_id, "rewards")]
    assert (cells["reference"]["mean reward"], cells["noop"]["cost"], cells["echo"]["cost"]) == \
        ("1.000", "$0.00 (2/3 priced)", "-")
    assert cells["reference"]["agent time"].endswith(" s")


def test_the_viewers_pages_open_on_it(harbor_sweep):
    from tests.viewer.served import Served

    config, result, _, rows, stages, _ = harbor_sweep
    served = Served(config.output.dir)
    try:
        sweep = urllib.parse.quote(result.sweep_id)
        assert result.sweep_id in served.text("/")
        assert "tiny" in served.text(f"/matrix?sweep={sweep}")
        page = served.text(f"/trial?sweep={sweep}&id={urllib.parse.quote('reference/tiny/0')}")
        assert "reference/tiny/0" in page
        status, _, _ = served.get(f"/log?path={urllib.parse.quote(stages['reference', 'tiny', 'verifier']['log_path'])}")
        assert status == 200
        status, _, body = served.get(f"/trial.atif.json?sweep={sweep}&id={urllib.parse.quote('echo/tiny/0')}")
        assert status == 200 and "42" in body.decode()
    finally:
        served.close()


@pytest.mark.agent_cli
@pytest.mark.parametrize("name", list(CLIS))
def test_a_real_cli_solves_an_offline_task_metered_through_the_proxy(harbor_sweep, name):
    import gzip

    from reb_ray.agents.toolchain import PINS
    from reb_ray.llm.apis import ANTHROPIC, CHAT, RESPONSES
    from reb_ray.llm.prices import cost_usd
    from reb_ray.llm.scripted import script_from
    from reb_ray.llm.usage import FIELDS, REPORTED_FIELDS

    config, rows, served = harbor_sweep[5]
    kind, model = CLIS[name]
    assert len(rows[name]) == 1, [(r["failure_category"], r["failure_reason"]) for r in rows[name]]
    row = rows[name][0]
    assert (row["status"], row["failure_owner"], row["reward"]) == ("scored", None, 1.0), (
        row["failure_reason"], row["agent_output_tail"])
    assert (row["agent_kind"], row["agent_version"], row["agent_exit_code"]) == (kind, PINS[kind].version, 0)
    # Metered by the proxy: the script's sums (what the kind's API carries), priced by the table;
    # every request the endpoint answered counted once (codex's polls of a running command too).
    api = {"claude_code": ANTHROPIC, "codex": RESPONSES, "mini_swe_agent": CHAT}[kind]
    usage = script_from(cli_script(model, kind)).total_usage().only(REPORTED_FIELDS[api])
    assert {f: row[f] for f in FIELDS} == usage.as_dict()
    assert (row["input_tokens"], row["output_tokens"]) == (5400, 104)
    assert (row["cost_source"], row["llm_model"]) == ("price_table", model)
    assert row["cost_usd"] == pytest.approx(cost_usd(model, usage)[0]) and row["cost_usd"] > 0
    answered = [r for s in served[name]["sessions"].values() for r in s["requests"]]
    assert row["llm_requests"] == len(answered) and sum(r["turn"] is not None for r in answered) == 2
    # Its transcript is kept, as for reb-ray trials; the proxy's request log and trajectory.json too.
    transcript = gzip.open(config.output.dir / row["trajectory_path"]).read().decode()
    assert row["llm_log_path"] and row["atif_path"]
    # Without internet: reb-ray's internal network, no egress proxy; the outside did not answer.
    assert (row["sandbox_network"], row["network_host_guard"], row["network_denied_count"]) == (
        "reb-ray-registries", True, None)
    assert "outside=blocked" in transcript and "outside=reached" not in transcript
    # The real key: in no file or variable of the sandbox, nor in anything stored.
    assert "key-files:[]" in transcript and "key-env:0" in transcript
    stored = b"".join(p.read_bytes() if not p.name.endswith(".gz") else gzip.open(p).read()
                      for p in config.output.dir.rglob("*") if p.is_file() and p.suffix != ".parquet")
    assert REAL_KEY.encode() not in stored


@pytest.mark.agent_cli
def test_the_cli_trials_leave_no_toolchain_mount_and_no_container(harbor_sweep, docker_client):
    """Slots are named by their owner's pid: none of a process that has ended (the sweep's
    Ray workers) is still mounted."""
    import os

    config = harbor_sweep[5][0]
    with open("/proc/self/mountinfo") as f:
        slots = [line.split()[4] for line in f if "/.slots/" in line]
    assert not [s for s in slots if not os.path.exists(f"/proc/{s.split('/.slots/')[1].split('-')[0]}")]
    assert docker_client.containers.list(all=True, filters={"label": f"reb-ray.sweep={config.resolved_sweep_id()}"}) == []
