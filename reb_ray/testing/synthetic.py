"""Synthetic runs for the analysis tests and benchmark, written as real Parquet through the
real ParquetSink: a trials row and its stage rows per attempt, as a worker writes them.

`trial(...)` builds one attempt from a compact description (one outcome letter per stage);
`FIXTURE` is the hand-made 3 agents x 6 tasks x 2 trials run the tests derive their expected
numbers from (by hand, from the letters below); `random_rows` makes a large run for timing (benchmarks/analysis.py).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from reb_ray.results.parquet_sink import ParquetSink
from reb_ray.testing.rows import stage_row, trial_row

GiB = 2**30
SWEEP = "syn"
#: Outcome letters: S success, F the agent's failure (runtime), D the agent's failure (deps),
#: R no report (every applicable stage the agent's failure, missing_report), H failed for lack
#: of GPUs, N applicable but not run (a missing asset), - the task does not apply the stage.
LETTERS = "SFDRHN-"
_CATEGORY = {"F": "runtime", "D": "deps", "R": "missing_report", "H": "insufficient_hardware",
             "N": "infra_assets_missing"}
_STATUS = {"S": "success", "F": "failure", "D": "failure", "R": "failure", "H": "failure", "N": "not_run",
           "-": "skipped"}
#: C5 checks by kind, as reb_ray.grading.c5 names them.
C5_KINDS = {"python_path": "path", "python_version": "version", "torch_version": "version",
            "cuda_available": "capability", "gpu_count": "capability", "ddp_expected_ok": "capability"}


def trial(agent: str, task: str, index: int, letters: str, *, attempt: int = 1, status: str = "scored",
          c0_missing: int | None = 0, c0_total: int = 10, lies: tuple[str, ...] = (), underclaims: tuple[str, ...] = (),
          c5: str = "audited", input_tokens: int | None = None, output_tokens: int | None = None,
          cost_usd: float | None = None, agent_s: float | None = 100.0, env_bytes: int | None = GiB,
          sweep: str = SWEEP) -> tuple[dict, list[dict]]:
    """One attempt's trials row and stage rows. `letters`: the outcomes of C1..C4 (LETTERS,
    four letters); C0 is success when c0_missing is 0, else failure (R: missing_report with
    c0_missing = c0_total). `lies` / `underclaims`: C5 checks judged hallucination / underclaim;
    `c5`: "audited", or "not_run" (no facts record: owner unknown). An infra_error attempt
    (`status`) carries no stage rows."""
    assert len(letters) == 4 and set(letters) <= set(LETTERS), letters
    base = {k: v for k, v in stage_row(agent, task, "", "", attempt=attempt, sweep=sweep, index=index).items()
            if k not in ("stage", "status")}
    row = trial_row(agent, task, attempt, status, sweep=sweep, index=index, suite="synthetic", agent_wall_time_s=agent_s,
                    input_tokens=input_tokens, output_tokens=output_tokens, cost_usd=cost_usd,
                    cost_source=None if input_tokens is None else ("price_table" if cost_usd is not None else "unknown"))
    if status != "scored":
        row.update(failure_owner="infra", failure_category="infra_sandbox", failure_reason="synthetic")
        return row, []
    no_report = "R" in letters
    stages: list[dict] = []
    missing = c0_total if no_report else c0_missing
    c0_status = "not_run" if missing is None else ("success" if missing == 0 else "failure")
    row.update(c0_status=c0_status, c0_missing=missing, c0_total=c0_total,
               report_status="missing_report" if no_report else "ok", env_size_status="success",
               env_size_bytes=env_bytes, stages_missing_assets=letters.count("N"), rerun=False)
    stages.append({**base, "stage": "c0", "status": c0_status,
                   "failure_category": "missing_report" if no_report else None})
    for n, letter in enumerate(letters, start=1):
        category = _CATEGORY.get(letter)
        row[f"c{n}_status"] = _STATUS[letter]
        if n != 2:
            row[f"c{n}_exit_code"] = 0 if letter == "S" else (1 if letter in "FD" else None)
        row[f"c{n}_failure_category"] = category
        stages.append({**base, "stage": f"c{n}", "status": _STATUS[letter], "failure_category": category,
                       "reason": f"synthetic {letter}", "duration_s": 1.0})
    items = [{"check": c, "kind": C5_KINDS[c], "verdict": "hallucination"} for c in lies]
    items += [{"check": c, "kind": C5_KINDS[c], "verdict": "underclaim"} for c in underclaims]
    if no_report or c5 == "not_run":
        row.update(c5_status="not_run", c5_path=None, c5_version=None, c5_capability=None, c5_underclaims=None)
        stages.append({**base, "stage": "c5", "status": "not_run",
                       "failure_category": "missing_report" if no_report else None})
    else:
        counts = {k: sum(i["kind"] == k for i in items if i["verdict"] == "hallucination")
                  for k in ("path", "version", "capability")}
        row.update(c5_status="success", c5_path=min(1, counts["path"]), c5_version=counts["version"],
                   c5_capability=counts["capability"], c5_underclaims=len(underclaims))
        stages.append({**base, "stage": "c5", "status": "success", "raw": json.dumps({"items": items})})
    stages.append({**base, "stage": "env_size", "status": "success"})
    stages.append({**base, "stage": "agent", "status": "success", "duration_s": agent_s})
    return row, stages


#: Baseline import totals of the fixture's tasks t1..t6.
TOTALS = {"t1": 10, "t2": 20, "t3": 30, "t4": 40, "t5": 50, "t6": 60}
#: C1..C4 letters per task for trial 0 and trial 1. C1 applies to t1-t4, C2 to all, C3 to
#: t1-t5, C4 to t1-t3. frugal and spender succeed alike; weak worse.
GOOD = {
    0: {"t1": "SSSS", "t2": "SSSH", "t3": "FSFF", "t4": "FSF-", "t5": "-FF-", "t6": "-F--"},
    1: {"t1": "SSSF", "t2": "FSFH", "t3": "FSFF", "t4": "FFF-", "t5": "-FF-", "t6": "-F--"},
}
WEAK = {
    0: {"t1": "FSFF", "t2": "DSFH", "t3": "FFFF", "t4": "FFN-", "t5": "-FF-", "t6": "-F--"},
    1: {"t1": "FSFF", "t2": "DFFH", "t3": "FFFF", "t4": "FFF-", "t5": "-FF-", "t6": "-R--"},
}
#: c0_missing per task for trial 0 and 1 (frugal, spender); weak misses half of every total.
GOOD_MISSING = {0: {"t1": 0, "t2": 2, "t3": 0, "t4": 4, "t5": 5, "t6": 0},
                1: {"t1": 0, "t2": 2, "t3": 3, "t4": 0, "t5": 5, "t6": 6}}


def fixture_rows() -> list[tuple[dict, list[dict]]]:
    """The FIXTURE run's attempts: frugal (5,000 tokens, $0.02 per trial), spender (100,000
    tokens, $0.40: 20x frugal's tokens, the same outcomes), weak (no LLM: tokens and cost
    unknown; an infra_error attempt before its t1/0 scored; no report on t6/1; C5 not audited on
    t5/0). C5 lies: frugal torch_version on t2/0 and gpu_count on t4/1, with a cuda_available
    under-claim on t1/0; spender the same lies; weak python_path on t1 (both trials)."""
    out = []
    for agent, tokens, cost in (("frugal", (4000, 1000), 0.02), ("spender", (90000, 10000), 0.40)):
        for index in (0, 1):
            for task, letters in GOOD[index].items():
                lies = ("torch_version",) if (task, index) == ("t2", 0) else ("gpu_count",) if (task, index) == ("t4", 1) else ()
                under = ("cuda_available",) if (task, index) == ("t1", 0) else ()
                out.append(trial(agent, task, index, letters, c0_missing=GOOD_MISSING[index][task],
                                 c0_total=TOTALS[task], lies=lies, underclaims=under, input_tokens=tokens[0],
                                 output_tokens=tokens[1], cost_usd=cost, agent_s=300.0 if agent == "spender" else 100.0))
    out.append(trial("weak", "t1", 0, "FFFF", status="infra_error"))
    for index in (0, 1):
        for task, letters in WEAK[index].items():
            out.append(trial("weak", task, index, letters, attempt=2 if (task, index) == ("t1", 0) else 1,
                             c0_missing=TOTALS[task] // 2, c0_total=TOTALS[task],
                             lies=("python_path",) if task == "t1" else (),
                             c5="not_run" if (task, index) == ("t5", 0) else "audited", agent_s=20.0))
    return out


def write(output_dir: Path, attempts: list[tuple[dict, list[dict]]]) -> Path:
    """Write each attempt (trials row, stage rows) with the real sink, one write per attempt as
    workers deliver them, and close it (its rolled parts all on disk)."""
    with ParquetSink(output_dir) as sink:
        for row, stages in attempts:
            sink.write([row], stages)
    return output_dir


def write_fixture(output_dir: Path) -> Path:
    """Write the FIXTURE run under `output_dir` and return it."""
    return write(output_dir, fixture_rows())


def _log(chars: int, what: str) -> str:
    line = f"{what}: Collecting torch==2.4.0 (from -r requirements.txt (line 3)) ... 0.93 s\n"
    return (line * (chars // len(line) + 1))[:chars]


def random_rows(tasks: int, agents: int, trials: int, seed: int = 0, log_chars: int = 0) -> list[tuple[dict, list[dict]]]:
    """A large synthetic run: `agents` agents of rising skill, each on `tasks` tasks x `trials`
    trials, outcomes drawn from a seeded generator, every stage row included; with
    `log_chars`, each C1..C4 stage row holds a log head and a log tail of that many characters."""
    rng = random.Random(seed)
    spec = [("S" if rng.random() < 0.7 else "-", "S", "S" if rng.random() < 0.95 else "-",
             "S" if rng.random() < 0.7 else "-") for _ in range(tasks)]
    out = []
    for a in range(agents):
        skill = 0.2 + 0.6 * a / max(1, agents - 1)
        tokens = 2000 * (a + 1) ** 2
        for t in range(tasks):
            for i in range(trials):
                letters = "".join("-" if s == "-" else ("S" if rng.random() < skill else rng.choice("FFDH"))
                                  for s in spec[t])
                total = 10 + t
                out.append(trial(f"agent{a}", f"task{t:03d}", i, letters, c0_missing=rng.randint(0, total // 3),
                                 c0_total=total, lies=("gpu_count",) if rng.random() > skill else (),
                                 input_tokens=tokens, output_tokens=tokens // 10,
                                 cost_usd=round(tokens * 3e-6, 6), agent_s=rng.uniform(60, 600)))
                if log_chars:
                    for stage in out[-1][1]:
                        if stage["stage"] in ("c1", "c2", "c3", "c4") and stage["status"] != "skipped":
                            stage.update(log_head=_log(log_chars, "head"), log_tail=_log(log_chars, "tail"))
    return out


#: What a hostile agent writes where the report shows its words: markup that runs if a page
#: does not escape it (the script, and the image's error handler, mark the document).
PAYLOAD = ('<script>document.documentElement.setAttribute("data-pwned", "script")</script>'
           '<img src="x" onerror="document.documentElement.setAttribute(\'data-pwned\', \'img\')">')
#: The trial that carries PAYLOAD in `with_agent_words`.
HOSTILE_TRIAL = "frugal/t3/0"


def with_agent_words(attempts: list[tuple[dict, list[dict]]], output_dir: Path) -> list[tuple[dict, list[dict]]]:
    """`attempts` with PAYLOAD wherever a report shows the agent's words on HOSTILE_TRIAL: its
    failure reason, agent output tail (with a terminal escape), C1 reason, log head and tail, and
    a report stage whose raw report.json holds it; its agent log stored as a gzip artifact under
    `output_dir` (the row's agent_log_path). Other attempts are unchanged."""
    import gzip

    rel = "artifacts/sweep_id=syn/frugal%2Ft3%2F0/1/agent.log.gz"
    (output_dir / rel).parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(output_dir / rel, "wt") as f:
        f.write(f"installing...\n{PAYLOAD}\n")
    out = []
    for row, stages in attempts:
        if row["trial_id"] == HOSTILE_TRIAL:
            row = {**row, "failure_reason": f"C1 failed: {PAYLOAD}", "agent_output_tail": f"{PAYLOAD}\x1b[2J",
                   "agent_log_path": rel}
            stages = [{**s, "reason": f"exit 1: {PAYLOAD}", "log_head": PAYLOAD, "log_tail": f"Traceback\n{PAYLOAD}"}
                      if s["stage"] == "c1" else s for s in stages]
            stages.append({**{k: row[k] for k in ("sweep_id", "trial_id", "attempt", "task_id", "agent")},
                           "stage": "report", "status": "success", "raw": json.dumps({"python_path": PAYLOAD})})
        out.append((row, stages))
    return out
