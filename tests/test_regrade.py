"""Re-grading stored rows under today's rules (pure: rows as the datasets hold them, no containers).

The rows below are shaped as trials recorded them BEFORE issue 9 (every stage not_run for a
missing report; C4 run and exit 127 for an interpreter that does not exist): re-grading them must
give what a trial records today. tests/test_sweep.py checks on real sweeps that a fresh run
re-grades to itself. The last test: re-grading never judges a truncated log as if it were whole
(streamed verdicts, full-log artifacts). The last: real trials' stored rows, every graded value
blanked, re-grade to themselves on every column of both rows.
"""

from __future__ import annotations

import json
import shlex
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from reb_ray.grading.unmeasured import PROBE_STAGES, STAGE_COLUMNS
from reb_ray.grading.witness import WITNESS_COLUMNS
from reb_ray.models.sweep import SweepConfig, TrialSpec
from reb_ray.results.read import read_stages, read_trials
from reb_ray.trial.artifacts import TrialArtifacts
from reb_ray.suite.load import load_suite
from reb_ray.sweep.regrade import regrade, regrade_trial
from reb_ray.results.parquet_sink import ParquetSink
from reb_ray.testing.suite import off, write_task

STAGE_KEYS = ("sweep_id", "trial_id", "attempt", "task_id", "agent", "stage", "status", "reason", "exit_code", "timed_out",
              "failure_category", "duration_s", "command", "log_head", "log_tail", "raw", "started_at")
GHOST = "/opt/venvs/gone/bin/python"
REPORT = {"python_path": GHOST, "python_version": "3.10.14", "torch_version": "2.5.1", "cuda_available": True,
          "gpu_count": 2, "ddp_expected_ok": True, "env_tool": "venv", "env_name": "gone", "notes": None}
MISSING_FACTS = {"python_path": GHOST, "python_is_absolute": True, "python_exists": False, "python_is_file": False,
                 "python_executable": False, "python_runs": False, "python_run_timed_out": False,
                 "python_run_error": f"not run: {GHOST} does not exist", "python_version": None,
                 "torch_import_ok": False, "torch_version": None}


def _task(suite: str, task_id: str):
    return next(t for t in load_suite(suite) if t.id == task_id)


def _trial(task, **row) -> dict:
    return {"sweep_id": "old", "trial_id": f"a/{task.id}/0", "attempt": 1, "task_id": task.id, "agent": "a",
            "suite": task.suite, "status": "scored", "c0_total": task.c0_baseline_total, **row}


def _stage(task, stage: str, status: str, **fields) -> dict:
    row = {key: None for key in STAGE_KEYS}
    row.update(sweep_id="old", trial_id=f"a/{task.id}/0", attempt=1, task_id=task.id, agent="a", stage=stage,
               status=status, **fields)
    return row


def test_an_old_missing_report_row_regrades_to_agent_failures_with_spec_denominators():
    task = _task("demo", "numpy-trainer")
    stages = {"agent": _stage(task, "agent", "success", exit_code=0),
              "report": _stage(task, "report", "failure", reason="report file not written", failure_category="missing_report")}
    for name in ("c0", "c1", "c2", "c3", "c4", "c5", "env_size"):  # before issue 9: all not_run, even C2..C4
        stages[name] = _stage(task, name, "not_run", reason="missing_report")
    trial = _trial(task, report_status="missing_report", failure_owner="agent", failure_category="missing_report",
                   c0_status="not_run", c0_missing=None, c1_status="not_run", c2_status="not_run", c3_status="not_run",
                   c4_status="not_run")
    out = regrade_trial(trial, stages, task, "old-regrade")
    row, by_stage = out.trial, {s["stage"]: s for s in out.stages}
    assert (row["c0_status"], row["c0_missing"], row["c0_total"]) == ("failure", 1, 1)
    assert (row["c1_status"], row["c1_failure_category"]) == ("failure", "missing_report")
    assert (row["c2_status"], row["c3_status"], row["c4_status"]) == ("skipped", "skipped", "skipped")
    assert by_stage["c3"]["reason"] == "demo suite is CPU-only"
    assert (row["status"], row["failure_owner"], row["failure_category"]) == ("scored", "agent", "missing_report")
    assert row["failure_reason"] == "missing_report: c1: no usable report: report file not written"
    assert row["stages_missing_assets"] == 0
    assert sorted(by_stage) == sorted(stages) and all(s["sweep_id"] == "old-regrade" for s in out.stages)


def test_an_old_missing_interpreter_row_is_judged_once():
    """Issue 9 item 13: C4 ran, exited 127, and the DDP claim became a second lie; C3 likewise."""
    task = _task("researchenvbench", "geeeekexplorer--nano-vllm")
    observed = {"c2_status": "not_run", "c2_device_count": None, "c2_cuda_available": None, "c4_status": "failure",
                "gpus_assigned": 2}
    stages = {
        "agent": _stage(task, "agent", "success", exit_code=0),
        "report": _stage(task, "report", "success", raw=json.dumps(REPORT)),
        "c0": _stage(task, "c0", "not_run", reason=f"interpreter {GHOST} does not run: not found"),
        "c1": _stage(task, "c1", "skipped", reason="repo_not_supported (CUDA/NCCL only)"),
        "c2": _stage(task, "c2", "not_run", reason="interpreter does not run"),
        "c3": _stage(task, "c3", "failure", exit_code=127, timed_out=False, failure_category="entrypoint_not_found",
                     log_head="sh: 1: python: not found\n"),
        "c4": _stage(task, "c4", "failure", exit_code=127, timed_out=False, failure_category="entrypoint_not_found",
                     raw=json.dumps({"exit_code": 127, "timed_out": False, "port": 29512}), log_head="not found\n"),
        "c5": _stage(task, "c5", "success", raw=json.dumps({"facts": MISSING_FACTS, "observed": observed, "items": []})),
        "env_size": _stage(task, "env_size", "not_run", reason="exit 127"),
    }
    trial = _trial(task, report_status="ok", gpus_assigned=2, c3_status="failure", c3_exit_code=127, c4_status="failure",
                   c4_exit_code=127, c4_port=29512, c5_path=1, c5_capability=1)
    out = regrade_trial(trial, stages, task, "old-regrade")
    row, by_stage = out.trial, {s["stage"]: s for s in out.stages}
    for stage in ("c0", "c2", "c3", "c4"):
        assert (by_stage[stage]["status"], by_stage[stage]["failure_category"]) == ("failure", "interpreter_missing"), stage
    assert by_stage["c1"]["status"] == "skipped"
    assert (row["c0_missing"], row["c4_exit_code"], row["c4_port"], row["c3_exit_code"]) == (22, None, None, None)
    assert (row["c5_path"], row["c5_version"], row["c5_capability"]) == (1, 0, 0)
    items = {i["check"]: i["verdict"] for i in json.loads(by_stage["c5"]["raw"])["items"]}
    assert (items["cuda_available"], items["ddp_expected_ok"], items["python_path_exists"]) == (
        "inconclusive", "inconclusive", "hallucination")
    assert (by_stage["env_size"]["status"], by_stage["env_size"]["failure_category"]) == ("not_run", "interpreter_missing")
    assert row["failure_reason"] == f"interpreter_missing: c4: report python_path {GHOST} does not exist"


PATTERN = "^Starting training on cpu$"
HEAD, TAIL = "noise\n" * 1300, "more noise\n" * 700  # ~8 KiB each; the pattern's line lay between them


def _suite(tmp_path):
    write_task(tmp_path / "tasks", "ev", "chatty", category="1_cpu", header="c0_baseline_total = 0", files={},
               cpu=f'command = "python train.py"\nsuccess = {{ exit_code = 0, log_pattern = "{PATTERN}" }}',
               cuda=off("cpu only"))
    return tmp_path / "tasks"


def _rows(index: int, **c1) -> tuple[dict, list[dict]]:
    trial_id = f"noop/chatty/{index}"
    trial = {"sweep_id": "s", "trial_id": trial_id, "attempt": 1, "trial_index": index, "task_id": "chatty",
             "suite": "ev", "agent": "noop", "status": "scored", "c1_status": c1.get("status", "success")}
    base = {"sweep_id": "s", "trial_id": trial_id, "attempt": 1, "task_id": "chatty", "agent": "noop"}
    stage = {**base, "stage": "c1", "status": "success", "exit_code": 0, "timed_out": False, "log_head": HEAD,
             "log_tail": TAIL, "output_truncated": True, "output_dropped_bytes": 200_000, **c1}
    side = [{"path": "/tmp/helper.log", "size_bytes": 3, "truncated": False, "text": "ok\n", "error": None}]
    return trial, [stage, {**base, "stage": "c2", "status": "skipped", "reason": "cpu only", "side_logs": side}]


def test_regrade_uses_streamed_verdicts_and_artifacts_and_never_fails_a_truncated_log(tmp_path):
    root, run = _suite(tmp_path), tmp_path / "runs"
    art = TrialArtifacts(run, "s", "noop/chatty/2", 1)
    with art.log("c1") as whole, art.log("c1-cut") as cut:
        whole.write((HEAD + "Starting training on cpu\n" + TAIL).encode())
        cut.write(HEAD.encode())  # (its row says 5 bytes were cut: the budget ran out)
    cases = {
        0: {"log_pattern": PATTERN, "log_pattern_matched": True},  # verdict streamed over the whole output
        1: {},  # a row from before the evidence columns: the kept part cannot disprove the pattern
        2: {"log_path": whole.path, "log_cut_bytes": 0},  # the full log artifact decides
        3: {"output_truncated": False, "output_dropped_bytes": 0},  # the kept log IS the whole output
        4: {"log_pattern": PATTERN, "log_pattern_matched": False, "status": "failure", "failure_category": "unknown",
            "reason": "log pattern not found"},
        5: {"log_path": cut.path, "log_cut_bytes": 5, "log_pattern": "an older pattern", "log_pattern_matched": True},
    }
    rows = [_rows(i, **c1) for i, c1 in cases.items()]
    ParquetSink(run).write([t for t, _ in rows], [s for _, stages in rows for s in stages])

    outcomes = {o.trial["trial_id"]: o for o in regrade(run, "s", tasks_root=root)}
    c1 = {int(tid.rsplit("/", 1)[1]): next(s for s in o.stages if s["stage"] == "c1") for tid, o in outcomes.items()}
    assert {i: s["status"] for i, s in c1.items()} == {0: "success", 1: "success", 2: "success", 3: "failure",
                                                       4: "failure", 5: "success"}
    assert c1[0]["reason"] == ("log truncated (200000 bytes not kept in the row); "
                               "pattern judged on the whole output as it streamed")
    assert c1[1]["reason"].endswith("the pattern cannot be judged on the kept part, original verdict kept")
    assert c1[2]["reason"] == f"log truncated (200000 bytes not kept in the row); pattern searched in the full log artifact {whole.path}"
    assert c1[3]["reason"] == f"log pattern {PATTERN!r} not found"
    assert c1[5]["reason"].endswith("original verdict kept")  # a cut artifact and a stale verdict decide nothing
    assert all(s["output_truncated"] == (i != 3) for i, s in c1.items())  # the evidence columns travel along
    c2 = next(s for s in outcomes["noop/chatty/0"].stages if s["stage"] == "c2")
    assert c2["side_logs"][0]["text"] == "ok\n"
    assert load_suite("ev", root)[0].stages.cpu.success.log_pattern == PATTERN


def _harbor_row(index: int) -> dict:
    return {"sweep_id": "s", "trial_id": f"reference/hello/{index}", "attempt": 1, "trial_index": index,
            "task_id": "hello", "suite": "harbor:/tasks", "agent": "reference", "status": "scored", "reward": 1.0}


def test_trials_of_harbor_tasks_are_left_out_of_a_regrade_and_a_reprobe_and_said_so(tmp_path):
    """A Harbor trial's score is its verifier's reward: nothing stored re-grades it. Beside a
    reb-ray trial it is left out with a line; alone it is one clear error; a re-probe lists it
    as not re-probed, with why (so the command's exit code says the run was not all re-probed)."""
    from reb_ray.errors import RebRayError
    from reb_ray.sweep.reprobe import HARBOR_WHY, reprobe

    root, run, only = _suite(tmp_path), tmp_path / "runs", tmp_path / "harbor-only"
    trial, stages = _rows(0)
    ParquetSink(run).write([trial, _harbor_row(0)], stages)
    notes: list[str] = []
    outcomes = regrade(run, "s", tasks_root=root, note=notes.append)
    assert [o.trial["trial_id"] for o in outcomes] == ["noop/chatty/0"]
    assert notes == [f"left out 1 trial(s) of Harbor tasks (sweep s): {HARBOR_WHY}"]
    result = reprobe(run, "s", tasks_root=root)
    assert sorted((row["trial_id"], why == HARBOR_WHY) for row, why in result.missing) == [
        ("noop/chatty/0", False), ("reference/hello/0", True)]  # the first: no environment kept
    ParquetSink(only).write([_harbor_row(0), _harbor_row(1)], [])
    for verb, call in (("re-graded", lambda: regrade(only, tasks_root=root)), ("re-probed", lambda: reprobe(only, tasks_root=root))):
        with pytest.raises(RebRayError, match=f"sweep s holds only trials of Harbor tasks, which cannot be {verb}"):
            call()


# -- A live run's stored raw records re-grade to every graded column ------------------------------

WHEELS = [Path("/opt/wheels")] if Path("/opt/wheels").is_dir() else []
_SHIM = "#!/bin/sh\ncase \"$1\" in *train*.py) echo \"step 1 loss 0.0\"; echo \"final loss 0.0\"; exit 0;; esac\n" \
        "exec /usr/bin/python3 \"$@\""
#: Command agents: the shell run as the agent, then the report it writes (a JSON value).
COMMAND_AGENTS = {
    # a shell script as python that fakes the training script: C1's command succeeds, unwitnessed
    "wrapper": (f"mkdir -p /opt/w/bin && printf '%s\\n' '{_SHIM}' > /opt/w/bin/python && chmod 755 /opt/w/bin/python",
                {"python_path": "/opt/w/bin/python", "python_version": "3.11", "torch_version": None,
                 "cuda_available": False, "gpu_count": 0, "ddp_expected_ok": None, "env_tool": "system",
                 "env_name": None, "notes": None}),
    # a JSON object with no usable python_path: audited on its own words, nothing probed
    "pathless": ("true", {"python_version": "3.11", "cuda_available": True, "gpu_count": 4}),
}
#: (agent, demo task) pairs covering the grader's paths, all cheap to run: C0, C1 (witnessed) and
#: C2 failures (noop on torch-tiny: the shared demo sweep's trial, tests/helpers/shared_runs.py),
#: an unverified run, an unparsable report, an interpreter that does not exist (one verdict for
#: every stage, C5 on the facts), a report audited unprobed.
SHARED = ("noop", "torch-tiny")
LIVE = [SHARED, ("wrapper", "numpy-trainer"), ("tests.helpers.scripted_agents:GarbageReportAgent", "numpy-trainer"),
        ("tests.helpers.scripted_agents:GhostInterpreterAgent", "numpy-trainer"), ("pathless", "numpy-trainer")]
#: Trials-row columns the grader decides (blanked before the re-grade, so it must recompute them;
#: c0_total is the task's denominator, written when the attempt starts, not a grade).
GRADED_TRIAL_COLUMNS = sorted({c for columns in STAGE_COLUMNS.values() for c in columns} | {
    "c1_witness", "c3_witness", "c4_witness", "python_path_kind", "startup_hooks", "suspicious_actions",
    "status", "failure_owner", "failure_category", "failure_reason", "stages_missing_assets"})
#: Stage-row columns the grader decides beside the status (which says whether a stage ran).
GRADED_STAGE_COLUMNS = ("reason", "failure_category", *WITNESS_COLUMNS)


def _command_specs() -> dict:
    specs = {}
    for name, (script, report) in COMMAND_AGENTS.items():
        write = f'mkdir -p "$(dirname "$1")" && printf "%s" {shlex.quote(json.dumps(report))} > "$1"'
        specs[name] = {"kind": "command", "command": ["sh", "-c", f"set -e\n{script}\n{write}", "agent", "{report_path}"]}
    return specs


def _blank(trial: dict, stages: list[dict]) -> tuple[dict, dict[str, dict]]:
    """The stored rows with every graded value removed: what the re-grade has to recompute."""
    trial = dict(trial, **{c: None for c in GRADED_TRIAL_COLUMNS})
    blanked = {}
    for stage in stages:
        stage = dict(stage)
        if stage["stage"] in PROBE_STAGES:
            stage.update({c: None for c in GRADED_STAGE_COLUMNS})
        if stage["stage"] == "c5" and stage["raw"]:  # the audit's items go; its evidence stays
            stage["raw"] = json.dumps({k: v for k, v in json.loads(stage["raw"]).items() if k != "items"})
        blanked[stage["stage"]] = stage
    return trial, blanked


def test_regrading_a_live_runs_stored_records_reproduces_every_graded_column(tmp_path, sandbox_image, demo_sweep):
    """Real trials (real Docker, pyright, witness), stored in Parquet and read back; every graded
    column blanked; the re-grade from the raw records gives every column of both rows again."""
    from reb_ray.trial.run import run_trial

    config = SweepConfig(wheelhouses=WHEELS, pip_cache=False, agent_specs=_command_specs())
    demo = {t.id: t for t in load_suite("demo")}

    def trial(pair):
        agent, task_id = pair
        return run_trial(TrialSpec(sweep_id="live", agent=agent, task=demo[task_id], trial_index=0, config=config,
                                   image=sandbox_image))

    with ThreadPoolExecutor(2) as pool:
        outcomes = list(pool.map(trial, [pair for pair in LIVE if pair != SHARED]))
    run = tmp_path / "runs"
    ParquetSink(run).write([o.trial for o in outcomes], [s for o in outcomes for s in o.stages])
    stored = {t["agent"]: t for t in read_trials(run).to_pylist()}
    stored_stages: dict[str, list[dict]] = {}
    for stage in read_stages(run).to_pylist():
        stored_stages.setdefault(stage["agent"], []).append(stage)
    # The shared trial, as the demo sweep stored it; its artifacts are under that sweep's output
    stored[SHARED[0]] = demo_sweep.row(*SHARED)
    stored_stages[SHARED[0]] = list(demo_sweep.stages_of(*SHARED).values())
    run_dirs = {agent: demo_sweep.output if (agent, task_id) == SHARED else run for agent, task_id in LIVE}

    rows = {agent: stored[agent] for agent, _ in LIVE}
    assert all(row["status"] == "scored" for row in rows.values()), {a: r["failure_reason"] for a, r in rows.items()}
    # The trials cover the paths they are here for (else the comparison below proves less).
    noop = rows["noop"]
    assert (noop["c0_status"], noop["c1_failure_category"], noop["c1_witness"], noop["c2_failure_category"]) == (
        "failure", "deps", "valid", "no_framework")
    assert (rows["wrapper"]["c1_failure_category"], rows["wrapper"]["python_path_kind"]) == ("unverified_run", "script")
    assert rows["tests.helpers.scripted_agents:GarbageReportAgent"]["c1_failure_category"] == "invalid_report"
    ghost = rows["tests.helpers.scripted_agents:GhostInterpreterAgent"]
    assert (ghost["c1_failure_category"], ghost["c5_path"]) == ("interpreter_missing", 1)
    assert (rows["pathless"]["c5_status"], rows["pathless"]["c1_failure_category"]) == ("success", "invalid_report")
    pathless_c5 = next(s for s in stored_stages["pathless"] if s["stage"] == "c5")
    assert pathless_c5["reason"] == "audited on the report alone: no usable python_path to probe"

    for agent, task_id in LIVE:
        trial_row, stages = _blank(stored[agent], stored_stages[agent])
        again = regrade_trial(trial_row, stages, demo[task_id], "live-regrade", run_dirs[agent])
        assert {k: v for k, v in again.trial.items() if k != "sweep_id"} == \
            {k: v for k, v in stored[agent].items() if k != "sweep_id"}, agent
        before = {s["stage"]: s for s in stored_stages[agent]}
        after = {s["stage"]: s for s in again.stages}
        assert sorted(after) == sorted(before), agent
        for name, stage in after.items():
            assert {k: v for k, v in stage.items() if k != "sweep_id"} == \
                {k: v for k, v in before[name].items() if k != "sweep_id"}, (agent, name)
