"""Re-grading never judges a truncated log as if it were whole (streamed verdicts, full-log artifacts)."""

from __future__ import annotations

import textwrap

from reb_ray.artifacts import TrialArtifacts
from reb_ray.models.task import load_suite
from reb_ray.regrade import regrade
from reb_ray.results.parquet_sink import ParquetSink

PATTERN = "^Starting training on cpu$"
TASK = f"""
id = "chatty"
suite = "ev"
category = "1_cpu"
c0_baseline_total = 0
source = {{ bundled = "." }}

[stages.cpu]
command = "python train.py"
success = {{ exit_code = 0, log_pattern = "{PATTERN}" }}

[stages.cuda]
applicable = false
skip_reason = "cpu only"
"""
HEAD, TAIL = "noise\n" * 1300, "more noise\n" * 700  # ~8 KiB each; the pattern's line lay between them


def _suite(tmp_path):
    task_dir = tmp_path / "tasks" / "ev" / "chatty"
    task_dir.mkdir(parents=True)
    (task_dir / "task.toml").write_text(textwrap.dedent(TASK))
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
