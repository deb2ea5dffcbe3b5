"""Per-trial detail for the HTML report: what `reb-ray trial show` tells about a trial, from its
rows alone (no artifact has to be opened to see why a trial failed).

`trial_details(output_dir, trials, stages, run, link_base)` gives one dict per trial's current
attempt (`reb_ray.results.read.latest_attempts`: scored or not, so an infra error is shown too),
sorted by sweep, agent, task and trial index, holding its status and whose failure it was, the
agent phase, tokens and cost, its outcome per stage C0..C5 (`analysis.outcomes`, the numbers the
tables count), every stage row (status, category, exit code, seconds, reason, log head and
tail), the raw report.json and C5 audit items, and relative links to its stored artifacts
(agent log, transcript, LLM request log, each stage's full log).

Every text here may be the agent's words (logs, reasons, the report): it is cut to a bound
(LOG_CHARS, RAW_CHARS) and left for the template to escape, never marked safe.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import quote

import pyarrow as pa

from reb_ray.results.read import latest_attempts

from .load import stages_of
from .outcomes import OUTCOME, STAGES, RunOutcomes, sort_key

#: Characters of a log head, log tail or output tail shown (the rest is counted).
LOG_CHARS = 2000
#: Characters of a raw report.json or C5 audit record shown.
RAW_CHARS = 8000
#: The stages columns the drill-down reads (beside the identity columns).
DETAIL_COLUMNS = ["sweep_id", "trial_id", "attempt", "stage", "status", "reason", "exit_code", "timed_out",
                  "failure_category", "duration_s", "log_head", "log_tail", "raw", "output_truncated", "log_path"]
#: Stages whose raw record is shown with the stage (report.json is shown on its own; C0's raw pyright
#: JSON is long and its findings are in the columns).
RAW_STAGES = ("c5",)
_ARTIFACTS = (("agent log", "agent_log_path"), ("transcript", "trajectory_path"), ("LLM requests", "llm_log_path"),
              ("network log", "network_log_path"))


def cut(text: str | None, limit: int, keep: str = "head") -> str | None:
    """`text` cut to `limit` characters (its start for keep="head", its end for "tail"), with
    a note of how many were left out; None stays None."""
    if text is None or len(text) <= limit:
        return text
    left = len(text) - limit
    return text[:limit] + f"\n[... {left:,} more characters]" if keep == "head" else f"[{left:,} characters before ...]\n" + text[-limit:]


def link(output_dir: Path, rel: str | None, link_base: Path) -> dict | None:
    """{"path": rel, "href": a relative URL from `link_base` (the HTML file's directory) to
    `output_dir/rel`, "exists": bool}, or None when nothing is stored. The href is
    percent-encoded and starts with "./" or "../", so no part of a path reads as a URL scheme."""
    if not rel:
        return None
    target = Path(output_dir) / rel
    href = os.path.relpath(target.resolve(), Path(link_base).resolve()).replace(os.sep, "/")
    if not href.startswith("../"):
        href = "./" + href
    return {"path": rel, "href": quote(href, safe="/._-~"), "exists": target.is_file()}


def _raw(text: str | None) -> str | None:
    if not text:
        return None
    try:
        text = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        pass
    return cut(text, RAW_CHARS)


def _stage(row: dict, output_dir: Path, link_base: Path) -> dict:
    return {
        "stage": row["stage"], "status": row["status"], "category": row.get("failure_category"),
        "exit_code": row.get("exit_code"), "timed_out": row.get("timed_out"), "duration_s": row.get("duration_s"),
        "reason": cut(row.get("reason"), LOG_CHARS), "log_head": cut(row.get("log_head"), LOG_CHARS),
        "log_tail": cut(row.get("log_tail"), LOG_CHARS, "tail"), "truncated": row.get("output_truncated"),
        "raw": _raw(row.get("raw")) if row["stage"] in RAW_STAGES else None,
        "log": link(output_dir, row.get("log_path"), link_base),
    }


def trial_details(output_dir: Path, trials: pa.Table, stages: pa.Table | None, run: RunOutcomes,
                  link_base: Path) -> list[dict]:
    """One dict per current attempt of `trials` (every attempt, as read_trials gives it):
    sweep_id, trial_id, task_id, agent, trial_index, attempt, attempts (written), status,
    failure_owner / failure_category / failure_reason, agent_* facts, input_tokens,
    output_tokens, tokens, cost_usd, cost_source, llm_model, outcomes ({stage: outcome} for
    C0..C5, empty when not scored), stages (dicts of `_stage`, in recorded order), report_raw,
    output_tail, artifacts ([(name, link)]). `stages`: the stages table with DETAIL_COLUMNS
    (any attempts) or None. Raises KeyError naming a missing identity column."""
    current = latest_attempts(trials)
    written: dict[tuple, int] = {}
    for key in zip(trials["sweep_id"].to_pylist(), trials["trial_id"].to_pylist()):
        written[key] = written.get(key, 0) + 1
    by_attempt: dict[tuple, list[dict]] = {}
    if stages is not None and stages.num_rows:
        for s in stages_of(stages, current).to_pylist():
            by_attempt.setdefault((s["sweep_id"], s["trial_id"], s["attempt"]), []).append(s)
    outcomes = {(r["sweep_id"], r["trial_id"]): r[OUTCOME] for r in run.rows if OUTCOME in r}
    out = []
    for row in current.to_pylist():
        key = (row["sweep_id"], row["trial_id"])
        mine = by_attempt.get((row["sweep_id"], row["trial_id"], row["attempt"]), [])
        report = next((s for s in mine if s["stage"] == "report"), None)
        tokens = None if row.get("input_tokens") is None or row.get("output_tokens") is None else (
            row["input_tokens"] + row["output_tokens"])
        out.append({
            **{c: row.get(c) for c in ("sweep_id", "trial_id", "task_id", "agent", "trial_index", "attempt", "status",
                                       "failure_owner", "failure_category", "failure_reason", "agent_kind",
                                       "agent_model", "agent_exit_code", "agent_wall_time_s", "agent_limit",
                                       "report_status", "report_source", "input_tokens", "output_tokens",
                                       "cost_usd", "cost_source", "llm_model", "llm_requests")},
            "attempts": written[key], "tokens": tokens,
            "outcomes": {s: o for s, o in outcomes.get(key, {}).items() if s in STAGES},
            "stages": [_stage(s, output_dir, link_base) for s in mine],
            "report_raw": _raw(report.get("raw")) if report else None,
            "output_tail": cut(row.get("agent_output_tail"), LOG_CHARS, "tail"),
            "artifacts": [(name, found) for name, column in _ARTIFACTS
                          if (found := link(output_dir, row.get(column), link_base))],
        })
    return sorted(out, key=lambda d: sort_key((d["sweep_id"], d["agent"], d["task_id"], d["trial_index"], d["trial_id"])))
