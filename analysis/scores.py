"""The one computation of per-(sweep, agent) numbers that every summary prints.

`summarize(trials)` gives one dict per (sweep_id, agent) whose keys are `COLUMNS`: first every
column of the ResearchEnvBench release's `master_summary.csv` (`RELEASE_COLUMNS`, in its order;
the release computes them in `m5/build_master_table.py` of `No-518/ResearchEnvBench`,
`build_summary_rows`), then ours (`OUR_COLUMNS`). The terminal table (`analysis.summary`, shown
by `python -m analysis`, `reb-ray report`, `reb-ray sweep` and `regrade`), the paper CSV
(`analysis.paper`, `reb-ray report --csv`) and the stage distribution (`analysis.stages`) only
format these numbers; no rule lives anywhere else.

Rows: only each trial's current attempt counts (`reb_ray.results.read.latest_attempts`), and only
when it is `scored`; infra_error and interrupted attempts never score. Unknown is None (an empty
CSV cell, `-` in the terminal), never 0.

Release columns, and where we deliberately differ:

- run_id: our sweep_id. baseline: our agent name (also in our `agent` column).
- job_count: scored trials (the release counts every job directory it finds, failed runs too).
- c0_missing_sum: sum of c0_missing over scored trials that have a value; None when none has
  one. The release adds `missing or 0`, so a C0 that never ran scored as "nothing missing"
  (a failure that looks like a perfect score); we add only what was measured and show `c0_not_run` beside it. (Grading
  records an agent-caused C0 non-run as a failure with c0_missing = c0_total, and an infra-caused
  one never reaches a scored row, so `c0_not_run` should be 0 on rows this version writes.)
- c0_total_sum: sum of c0_total, the task spec's canonical baseline import count (the release's
  `c0_repo_baseline_totals.json`, 2858 over its 44 repositories), over every scored trial.
- c0_total_sum_reported: always None. The release sums the import total each job's own pyright
  script counted; we record only the canonical total, so there is nothing to sum.
- c0_missing_over_total: "c0_missing_sum/c0_total_sum"; None when either is unknown or the total
  is 0 (the release: empty when the total is 0).
- cN_*_denom (N = 1..4): scored trials where the stage applies, i.e. its status is not `skipped`
  (applicability comes from the task spec; a null status, a row older than the stage, counts
  nowhere). The release takes C1/C3/C4 applicability from its categories CSV and counts C2 for
  every job; our 44 ResearchEnvBench specs apply C2 to all of them, so the denominators match
  (C1 29, C2 44, C3 43, C4 32) while a demo task may opt out of C2.
- cN_*_success_over_all: "success/denom" (the paper's rate, every applicable trial in the
  denominator); None when denom is 0 (the release leaves the cell empty).
- cN_*_success, cN_*_failed, cN_*_skipped: success + failed + skipped = denom, as in the
  release. `failed` is the agent's failures only: a `failure`, or a `not_run` whose
  cN_failure_category the agent owns (`reb_ray.grading.categories.owner_of`). `skipped` is an
  applicable stage not measured against the agent, the release's `skipped` within its
  denominator (its scripts write `skipped` for e.g. too few GPUs): our `cN_*_hardware` (a
  category owned by hardware, `insufficient_hardware`) plus `cN_*_not_run` (not run for a reason
  that is not the agent's, e.g. a missing asset under `--skip-missing-assets`; an infra-owned
  failure, which a scored row should never hold, is counted here too). A failure with no
  category is the agent's.
- c5_path_sum, c5_version_sum, c5_capability_sum: sums of the known values (None when no trial
  has one; the release's `or 0` makes an unaudited report honest). c5_total_sum: their sum
  over the known ones.
- agent_wall_time_avg_sec: mean agent phase seconds over scored trials with a value, rounded to
  2 decimals; agent_time_valid_jobs: how many had one.
- env_size_avg_gb: the release's measure. Per trial, every regular-file path under the
  interpreter's sys.prefix counted with its size, a hard-linked file once per path, symlinks
  not followed (`env_size_apparent_bytes`, what 42 of the release's 44 `measure_env_size.py`
  copies sum; one runs `du -sb`, which counts a hard-linked file once, and one measures
  nothing); the mean over the scored trials that have it, / 2**30 (GiB, as the release's MiB /
  1024), rounded to 3 decimals. The release rounds each trial to whole MiB first (a difference
  below 0.001 GiB). env_valid_jobs: how many had a size.
- agent_tokens_input_sum, agent_tokens_output_sum: sums of the trials' `input_tokens` /
  `output_tokens` columns, read by name when the table has them (None otherwise or when no
  trial has a value). agent_tokens_total_sum: the sum of input + output over trials that know
  both; agent_tokens_total_avg: that sum / those trials, rounded to 3 decimals (the release
  divides a run-level token export by agent_time_valid_jobs).

Our columns: agent; c0_not_run (scored trials whose C0 is `not_run`); c0_unowned_sum (the sum of
`c0_unowned` over scored trials that know it: imports that resolve only to files no installed
distribution owns, e.g. an empty package made by hand; None when no trial knows it; the paper's
c0_missing_sum is unchanged by it); per stage
cN_*_success_over_measured ("success/(success + failed)", the agent's own record with hardware
and unmeasured stages apart; None when nothing was measured), cN_*_hardware, cN_*_not_run;
c5_not_run; c5_underclaims_sum (claims below what was observed, counted apart);
c5_report_faults_sum (informational report keys missing or of the wrong JSON type, summed over
the audited trials: reb_ray.models.report; never part of c5_total_sum); env_size_unique_avg_gb
(our disk measure: the same walk, each inode once, `env_size_bytes`; mean / 2**30, 3 decimals)
and env_unique_valid_jobs;
stages_missing_assets_sum (stages left unmeasured because an asset was missing: the trials
column `stages_missing_assets`, None when no trial records it); infra_errors (infra_error
attempts of the pair, every attempt, retried ones included); reruns (current trials that a
`--rerun` produced); cost_usd_sum (USD: the sum of the trials' `cost_usd` over scored trials
that know it, the proxy's tokens priced by the price table; None when none does, never 0 for
unknown) and cost_valid_jobs (how many knew it: a sum over fewer trials than job_count leaves
some cost out). Cost per successful stage is in `analysis.cost`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from reb_ray.results.read import latest_attempts, latest_indices

from .outcomes import codes_of, column, equal, numbers, outcome_codes, select

STAGES = (("c1", "c1_cpu"), ("c2", "c2_cuda"), ("c3", "c3_single_gpu"), ("c4", "c4_multi_gpu"))

RELEASE_COLUMNS = [
    "run_id", "baseline", "job_count", "c0_missing_sum", "c0_total_sum", "c0_total_sum_reported",
    "c0_missing_over_total",
    *(f"{name}_denom" for _, name in STAGES),
    *(f"{name}_success_over_all" for _, name in STAGES),
    *(f"{name}_{count}" for _, name in STAGES for count in ("success", "failed", "skipped")),
    "c5_path_sum", "c5_version_sum", "c5_capability_sum", "c5_total_sum",
    "agent_wall_time_avg_sec", "agent_time_valid_jobs", "env_size_avg_gb", "env_valid_jobs",
    "agent_tokens_input_sum", "agent_tokens_output_sum", "agent_tokens_total_sum", "agent_tokens_total_avg",
]
OUR_COLUMNS = [
    "agent", "c0_not_run", "c0_unowned_sum",
    *(f"{name}_{extra}" for _, name in STAGES for extra in ("success_over_measured", "hardware", "not_run")),
    "c5_not_run", "c5_underclaims_sum", "stages_missing_assets_sum", "infra_errors", "reruns",
    "cost_usd_sum", "cost_valid_jobs", "c5_report_faults_sum", "env_size_unique_avg_gb", "env_unique_valid_jobs",
]
COLUMNS = RELEASE_COLUMNS + OUR_COLUMNS

def _known(values: Iterable[Any]) -> list:
    return [v for v in values if v is not None]


def _sum(values: Iterable[Any]) -> Any:
    known = _known(values)
    return sum(known) if known else None


def _ratio(numerator: int | None, denominator: int | None) -> str | None:
    if numerator is None or not denominator:
        return None
    return f"{numerator}/{denominator}"


def _sort_key(key: tuple) -> tuple:
    return tuple((v is None, v or "") for v in key)


def _group(sweep_id: str | None, agent: str | None, scored: pa.Table, rows: np.ndarray, infra_errors: int,
           codes: dict[str, np.ndarray], values: dict[str, tuple[np.ndarray, np.ndarray]],
           flags: dict[str, np.ndarray]) -> dict:
    """One summary row from the scored trials at `rows` (positions in `scored`, table order)."""
    def known(name: str) -> list:
        v, k = values[name]
        return v[rows[k[rows]]].tolist()

    def total(name: str):
        found = known(name)
        return sum(found) if found else None

    out: dict[str, Any] = {"run_id": sweep_id, "baseline": agent, "agent": agent, "job_count": len(rows),
                           "infra_errors": infra_errors}
    missing, total_imports = total("c0_missing"), total("c0_total")
    out.update(c0_missing_sum=missing, c0_total_sum=total_imports, c0_total_sum_reported=None,
               c0_missing_over_total=_ratio(missing, total_imports),
               c0_not_run=int(flags["c0_not_run"][rows].sum()), c0_unowned_sum=total("c0_unowned"))
    for stage, name in STAGES:
        n = np.bincount(codes[stage][rows], minlength=6)
        success, failure, hardware, not_run = (int(n[i]) for i in range(4))
        denom = success + failure + hardware + not_run
        out.update({
            f"{name}_denom": denom, f"{name}_success_over_all": _ratio(success, denom),
            f"{name}_success": success, f"{name}_failed": failure,
            f"{name}_skipped": hardware + not_run,
            f"{name}_success_over_measured": _ratio(success, success + failure),
            f"{name}_hardware": hardware, f"{name}_not_run": not_run,
        })
    for key in ("path", "version", "capability", "underclaims", "report_faults"):
        out[f"c5_{key}_sum"] = total(f"c5_{key}")
    out["c5_total_sum"] = _sum(out[f"c5_{key}_sum"] for key in ("path", "version", "capability"))
    out["c5_not_run"] = int(flags["c5_not_run"][rows].sum())

    times = known("agent_wall_time_s")
    out["agent_wall_time_avg_sec"] = round(sum(times) / len(times), 2) if times else None
    out["agent_time_valid_jobs"] = len(times)
    sizes = known("env_size_apparent_bytes")  # the release's: every path counted
    out["env_size_avg_gb"] = round(sum(sizes) / len(sizes) / 2**30, 3) if sizes else None
    out["env_valid_jobs"] = len(sizes)
    unique = known("env_size_bytes")  # ours: each inode once
    out["env_size_unique_avg_gb"] = round(sum(unique) / len(unique) / 2**30, 3) if unique else None
    out["env_unique_valid_jobs"] = len(unique)

    # Tokens come from the node's metering proxy (LLM agents); unknown stays None, and an
    # older table may lack the columns.
    out["agent_tokens_input_sum"] = total("input_tokens")
    out["agent_tokens_output_sum"] = total("output_tokens")
    totals = known("tokens")
    out["agent_tokens_total_sum"] = sum(totals) if totals else None
    out["agent_tokens_total_avg"] = round(sum(totals) / len(totals), 3) if totals else None

    costs = known("cost_usd")
    out["cost_usd_sum"] = round(sum(costs), 6) if costs else None
    out["cost_valid_jobs"] = len(costs)
    out["stages_missing_assets_sum"] = total("stages_missing_assets")
    out["reruns"] = int(flags["rerun"][rows].sum())
    return {c: out[c] for c in COLUMNS}


def current_scored(trials: pa.Table) -> list[dict]:
    """The scored current attempts of `trials` (`latest_attempts`, then status == "scored") as
    row dicts. Raises KeyError naming a missing identity column (sweep_id, trial_id, ...)."""
    return [r for r in latest_attempts(trials).to_pylist() if r.get("status") == "scored"]


#: The trials columns `summarize` reads.
SUMMARY_COLUMNS = (
    "sweep_id", "trial_id", "attempt", "status", "agent", "c0_status", "c0_missing", "c0_total", "c0_unowned",
    *(f"{s}_{c}" for s, _ in STAGES for c in ("status", "failure_category")),
    "c5_status", "c5_path", "c5_version", "c5_capability", "c5_underclaims", "c5_report_faults",
    "agent_wall_time_s", "env_size_apparent_bytes", "env_size_bytes", "input_tokens", "output_tokens", "cost_usd",
    "stages_missing_assets", "rerun",
)
_SUMMED = ("c0_missing", "c0_total", "c0_unowned", "c5_path", "c5_version", "c5_capability", "c5_underclaims",
           "c5_report_faults", "agent_wall_time_s", "env_size_apparent_bytes", "env_size_bytes", "input_tokens",
           "output_tokens", "cost_usd", "stages_missing_assets")


def summarize(trials: pa.Table) -> list[dict]:
    """One dict per (sweep_id, agent) of a trials table (TRIALS_SCHEMA or a subset of its
    columns: any column other than sweep_id, trial_id, attempt, status, agent may be absent and
    reads as null), keys exactly COLUMNS, sorted by sweep then agent. Definitions: the module
    docstring. A pair with only unscored attempts still appears, with job_count 0.
    Raises KeyError naming a missing identity column.

    Column-wise: the current attempts are picked and the outcomes coded on columns; the sums of
    each pair run over its trials in the table's order, as Python adds them.
    """
    if "agent" not in trials.column_names:
        raise KeyError("trials table lacks column 'agent'")
    trials = select(trials, SUMMARY_COLUMNS)
    current = trials.take(pa.array(latest_indices(trials), pa.int64()))
    scored = current.filter(pc.fill_null(pc.equal(current["status"], "scored"), False))
    all_keys = list(zip(trials["sweep_id"].to_pylist(), trials["agent"].to_pylist()))
    key_code, keys = codes_of(all_keys)
    infra = np.bincount(key_code[equal(trials, "status", "infra_error")], minlength=len(keys))
    index = {k: i for i, k in enumerate(keys)}
    scored_code = np.array([index[k] for k in zip(scored["sweep_id"].to_pylist(), scored["agent"].to_pylist())],
                           np.int64)
    by_key = np.argsort(scored_code, kind="stable")
    bounds = np.searchsorted(scored_code[by_key], np.arange(len(keys) + 1))
    codes = {stage: outcome_codes(scored, stage, judge_c5=False) for stage, _ in STAGES}
    values = {name: numbers(scored, name) for name in _SUMMED}
    (inputs, in_known), (outputs, out_known) = values["input_tokens"], values["output_tokens"]
    values["tokens"] = (inputs.astype(np.int64) + outputs.astype(np.int64), in_known & out_known)
    flags = {"c0_not_run": equal(scored, "c0_status", "not_run"), "c5_not_run": equal(scored, "c5_status", "not_run"),
             "rerun": pc.fill_null(column(scored, "rerun", pa.bool_()), False).to_numpy(zero_copy_only=False)}
    return [_group(key[0], key[1], scored, by_key[bounds[i]:bounds[i + 1]], int(infra[i]), codes, values, flags)
            for i, key in enumerate(keys)]
