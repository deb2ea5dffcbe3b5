"""A small hand-made results directory, written with the real ParquetSink, shared by the
summary, CSV and CLI tests. Every number the tests expect is derived by hand from ROWS."""

from __future__ import annotations

from pathlib import Path

from reb_ray.results.parquet_sink import ParquetSink
from reb_ray.testing.rows import trial_row

GiB = 2**30


def row(agent: str, task: str, attempt: int, status: str, sweep: str = "s1", **values) -> dict:
    """A trials row of `agent` on `task` (trial index 0) in the suite "hand"."""
    return trial_row(agent, task, attempt, status, sweep=sweep, suite="hand", **values)


ROWS = [
    # alpha t1: an infra attempt, then scored. C3 is the agent's failure, C4 the hardware's.
    row("alpha", "t1", 1, "infra_error", failure_owner="infra", failure_category="infra_sandbox",
        c0_missing=99, c0_total=10, c0_unowned=5, agent_wall_time_s=1000.0, env_size_bytes=99 * GiB,
        input_tokens=9999, output_tokens=999, cost_usd=9.0),
    row("alpha", "t1", 2, "scored", c0_status="failure", c0_missing=2, c0_total=10, c0_unowned=1,
        c1_status="success", c2_status="success", c3_status="failure", c3_failure_category="runtime",
        c4_status="failure", c4_failure_category="insufficient_hardware", c5_status="failure",
        c5_path=0, c5_version=1, c5_capability=1, c5_underclaims=0, c5_report_faults=2,
        agent_wall_time_s=100.0, env_size_bytes=2 * GiB, env_size_apparent_bytes=3 * GiB,  # 1 GiB hard-linked twice
        stages_missing_assets=0, rerun=False,
        input_tokens=1000, output_tokens=100, cost_usd=0.5, cost_source="price_table"),
    # alpha t2: no report (the agent's): C0 counts every import as missing, C1 fails as deps;
    # C3's asset is missing (--skip-missing-assets): not run, infra-owned, unmeasured.
    row("alpha", "t2", 1, "scored", c0_status="failure", c0_missing=20, c0_total=20,
        c1_status="failure", c1_failure_category="deps", c2_status="success",
        c3_status="not_run", c3_failure_category="infra_assets_missing", c4_status="skipped",
        c5_status="not_run", agent_wall_time_s=None, env_size_bytes=None, stages_missing_assets=1,
        input_tokens=200, output_tokens=20, cost_usd=None, cost_source="unknown"),  # a model the price table lacks
    # alpha t3: scored, then --rerun scored again (current), then a rerun attempt lost to infra,
    # which does not erase the score. C0 did not run: its missing count is unknown.
    row("alpha", "t3", 1, "scored", c0_status="success", c0_missing=0, c0_total=30, c1_status="failure",
        c1_failure_category="runtime", c2_status="skipped", c3_status="skipped", c4_status="success",
        c5_status="success", c5_path=5, c5_version=5, c5_capability=5, c5_underclaims=5, c5_report_faults=9,
        agent_wall_time_s=9999.0, env_size_bytes=9 * GiB, env_size_apparent_bytes=9 * GiB, stages_missing_assets=0),
    row("alpha", "t3", 2, "scored", c0_status="not_run", c0_missing=None, c0_total=30,
        c1_status="success", c2_status="skipped", c3_status="skipped",
        c4_status="failure", c4_failure_category="insufficient_hardware", c5_status="success",
        c5_path=1, c5_version=0, c5_capability=0, c5_underclaims=2, c5_report_faults=0,
        agent_wall_time_s=50.123, env_size_bytes=1_000_000_000, env_size_apparent_bytes=1_500_000_000,
        stages_missing_assets=0, rerun=True,
        input_tokens=300, output_tokens=None, cost_usd=0.25, cost_source="price_table"),
    row("alpha", "t3", 3, "infra_error", failure_owner="infra", failure_category="infra_daemon", rerun=True),
    # alpha t4: interrupted only: neither scored nor an infra error.
    row("alpha", "t4", 1, "interrupted", c0_missing=7, c0_total=7, c1_status="success"),
    # beta: two infra attempts of one trial, nothing scored.
    row("beta", "t1", 1, "infra_error", failure_owner="infra", failure_category="infra_clone"),
    row("beta", "t1", 2, "infra_error", failure_owner="infra", failure_category="infra_clone"),
]


def write_run(output_dir: Path, rows: list[dict] = ROWS) -> Path:
    """Write `rows` under `output_dir` with the real sink, one shard per attempt as workers do."""
    sink = ParquetSink(output_dir)
    for r in rows:
        sink.write([r], [])
    return output_dir
