"""A small synthetic run holding every kind of row the analysis reads, for the test that keeps
its numbers from changing when its implementation does (tests/analysis/test_equivalence.py).

It is the union of three runs, each in its own sweep, written with the real ParquetSink:

- "syn": `synthetic.fixture_rows` (the hand-made 3 agents x 6 tasks x 2 trials: scored trials,
  the agent's failures, hardware failures, a missing report, an unaudited C5, lies and
  under-claims, an infra_error attempt before a scored second attempt, unknown tokens and cost);
- "rnd": `synthetic.random_rows(7, 4, 3, seed=11)` (several trials per task: bootstrap
  intervals, pass@k, paired comparisons), with C0 modules no distribution owns on every fifth
  trial, report faults on every seventh, a re-run (`rerun`) second attempt on every eleventh, a
  row reused from another sweep (`reused_from`) on every thirteenth, the shortcuts the probe
  phase records on some, and two kinds of hardware fingerprint (the by-hardware split);
- "s1": `tests/analysis/runs.ROWS`' shape (interrupted and infra-only trials, a C0 not run, a
  rerun lost to infrastructure), rebuilt here so the package does not import the tests.

Deterministic: the same rows on every call.
"""

from __future__ import annotations

from pathlib import Path

from reb_ray.testing.rows import trial_row
from reb_ray.testing.synthetic import fixture_rows, random_rows, write

GiB = 2**30

_KINDS = ({"gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 2, "cuda_driver_version": "12.4"},
          {"gpu_model": None, "gpu_count": 0, "cuda_driver_version": None})


def _hand(agent: str, task: str, attempt: int, status: str, **values) -> tuple[dict, list[dict]]:
    return trial_row(agent, task, attempt, status, sweep="s1", suite="hand", **values), []


def _hand_rows() -> list[tuple[dict, list[dict]]]:
    return [
        _hand("alpha", "t1", 1, "infra_error", failure_owner="infra", failure_category="infra_sandbox",
              c0_missing=99, c0_total=10, c0_unowned=5, agent_wall_time_s=1000.0, env_size_bytes=99 * GiB,
              input_tokens=9999, output_tokens=999, cost_usd=9.0),
        _hand("alpha", "t1", 2, "scored", c0_status="failure", c0_missing=2, c0_total=10, c0_unowned=1,
              c1_status="success", c2_status="success", c3_status="failure", c3_failure_category="runtime",
              c4_status="failure", c4_failure_category="insufficient_hardware", c5_status="failure",
              c5_path=0, c5_version=1, c5_capability=1, c5_underclaims=0, c5_report_faults=2,
              agent_wall_time_s=100.0, env_size_bytes=2 * GiB, env_size_apparent_bytes=3 * GiB,
              stages_missing_assets=0, rerun=False, input_tokens=1000, output_tokens=100, cost_usd=0.5,
              cost_source="price_table"),
        _hand("alpha", "t2", 1, "scored", c0_status="failure", c0_missing=20, c0_total=20,
              c1_status="failure", c1_failure_category="deps", c2_status="success",
              c3_status="not_run", c3_failure_category="infra_assets_missing", c4_status="skipped",
              c5_status="not_run", agent_wall_time_s=None, env_size_bytes=None, stages_missing_assets=1,
              input_tokens=200, output_tokens=20, cost_usd=None, cost_source="unknown"),
        _hand("alpha", "t3", 1, "scored", c0_status="success", c0_missing=0, c0_total=30, c1_status="failure",
              c1_failure_category="runtime", c2_status="skipped", c3_status="skipped", c4_status="success",
              c5_status="success", c5_path=5, c5_version=5, c5_capability=5, c5_underclaims=5, c5_report_faults=9,
              agent_wall_time_s=9999.0, env_size_bytes=9 * GiB, env_size_apparent_bytes=9 * GiB,
              stages_missing_assets=0),
        _hand("alpha", "t3", 2, "scored", c0_status="not_run", c0_missing=None, c0_total=30,
              c1_status="success", c2_status="skipped", c3_status="skipped",
              c4_status="failure", c4_failure_category="insufficient_hardware", c5_status="success",
              c5_path=1, c5_version=0, c5_capability=0, c5_underclaims=2, c5_report_faults=0,
              agent_wall_time_s=50.123, env_size_bytes=1_000_000_000, env_size_apparent_bytes=1_500_000_000,
              stages_missing_assets=0, rerun=True, input_tokens=300, output_tokens=None, cost_usd=0.25,
              cost_source="price_table"),
        _hand("alpha", "t3", 3, "infra_error", failure_owner="infra", failure_category="infra_daemon", rerun=True),
        _hand("alpha", "t4", 1, "interrupted", c0_missing=7, c0_total=7, c1_status="success"),
        _hand("beta", "t1", 1, "infra_error", failure_owner="infra", failure_category="infra_clone"),
        _hand("beta", "t1", 2, "infra_error", failure_owner="infra", failure_category="infra_clone"),
    ]


def every_kind_rows() -> list[tuple[dict, list[dict]]]:
    """The attempts of the run (module docstring), each (trials row, stage rows)."""
    out = list(fixture_rows())
    for n, (row, stages) in enumerate(random_rows(7, 4, 3, seed=11)):
        row = {**row, "sweep_id": "rnd", **_KINDS[n % 3 == 0]}
        stages = [{**s, "sweep_id": "rnd"} for s in stages]
        if n % 5 == 0:
            row.update(c0_unowned=n % 3, c0_unowned_modules=["handmade"] if n % 3 else [])
        if n % 7 == 0:
            row.update(c5_report_faults=1 + n % 2)
        if n % 13 == 0:
            row.update(reused_from="older-sweep")
        if n % 6 == 0:
            row.update(c1_witness="missing", repo_restored_files=["setup.py"], suspicious_actions=["pip uninstall"],
                       python_path_kind="script" if n % 12 == 0 else "elf")
            if row["c1_status"] == "failure":
                row.update(c1_failure_category="unverified_run")
        if n % 9 == 0:
            row.update(cost_usd=None, cost_source="unknown")
        out.append((row, stages))
        if n % 11 == 0:  # a --rerun: a second scored attempt replaces the first
            again = {**row, "attempt": 2, "rerun": True, "c1_status": "success" if row["c1_status"] != "skipped" else "skipped",
                     "c1_failure_category": None}
            out.append((again, [{**s, "attempt": 2} for s in stages]))
        if n % 17 == 0:  # a rerun lost to infrastructure never erases the score
            out.append(({**trial_row(row["agent"], row["task_id"], 3, "infra_error", sweep="rnd",
                                   index=row["trial_index"], suite="synthetic"),
                         "failure_owner": "infra", "failure_category": "infra_node", "rerun": True}, []))
    return out + _hand_rows()


def write_every_kind(output_dir: Path) -> Path:
    """Write the run under `output_dir` (one sink write per attempt) and return it."""
    return write(Path(output_dir), every_kind_rows())
