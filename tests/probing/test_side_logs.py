"""Side logs: files a stage command writes are cleared before it and collected (bounded) after it."""

from __future__ import annotations

from reb_ray.models.task import StageSpec
from reb_ray.probing.command import run_stage_command, stage_workdir
from reb_ray.probing.side_logs import TAIL_BYTES, collect_side_logs


def test_side_logs_are_this_stages_own_and_bounded(make_sandbox):
    sb = make_sandbox()
    repo = f"{sb.workdir}/repo"
    sb.exec(["mkdir", "-p", f"{repo}/sub"])
    helper_log = f"{sb.workdir}/helper.log"  # absolute (the local provider's sandbox is a host directory)
    # What an earlier stage (or the agent) left there must not be collected as this stage's.
    sb.exec(["sh", "-c", f"echo stale > {helper_log}; echo stale > {repo}/sub/gone.log"])
    stage = StageSpec(
        command=(f"(echo 'lighthouse: error: bind failed'; head -c 200000 /dev/zero | tr '\\0' x; echo; "
                 f"echo 'lighthouse: exiting') > {helper_log} 2>&1 & wait; echo main done"),
        workdir="sub", timeout_s=60, side_logs=[helper_log, "gone.log", "never.log"])
    res = run_stage_command(sb, stage, repo, "/usr/bin/python3", f"{sb.workdir}/shim")
    assert res.exit_code == 0 and "main done" in res.output
    items = collect_side_logs(sb, stage.side_logs, stage_workdir(stage, repo))
    helper, gone, never = items
    assert helper["path"] == helper_log and helper["error"] is None
    assert helper["size_bytes"] == len("lighthouse: error: bind failed\n") + 200001 + len("lighthouse: exiting\n")
    assert helper["truncated"] is True and len(helper["text"]) == TAIL_BYTES
    assert helper["text"].endswith("x\nlighthouse: exiting\n") and "stale" not in helper["text"]
    assert gone == {"path": "gone.log", "size_bytes": None, "truncated": None, "text": None,
                    "error": "not found after the stage"}
    assert never["error"] == "not found after the stage"
