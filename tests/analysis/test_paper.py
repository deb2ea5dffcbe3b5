"""The paper-compatible CSV, built from a hand-made Parquet run; every cell derived by hand."""

from __future__ import annotations

import csv
import io

from analysis.paper import to_csv
from analysis.scores import COLUMNS, RELEASE_COLUMNS, summarize
from reb_ray.results.read import read_trials

from .runs import write_run

# The header of the release's master_summary.csv (ResearchEnvBench m5/build_master_table.py).
RELEASE_HEADER = (
    "run_id,baseline,job_count,c0_missing_sum,c0_total_sum,c0_total_sum_reported,c0_missing_over_total,"
    "c1_cpu_denom,c2_cuda_denom,c3_single_gpu_denom,c4_multi_gpu_denom,"
    "c1_cpu_success_over_all,c2_cuda_success_over_all,c3_single_gpu_success_over_all,c4_multi_gpu_success_over_all,"
    "c1_cpu_success,c1_cpu_failed,c1_cpu_skipped,c2_cuda_success,c2_cuda_failed,c2_cuda_skipped,"
    "c3_single_gpu_success,c3_single_gpu_failed,c3_single_gpu_skipped,"
    "c4_multi_gpu_success,c4_multi_gpu_failed,c4_multi_gpu_skipped,"
    "c5_path_sum,c5_version_sum,c5_capability_sum,c5_total_sum,"
    "agent_wall_time_avg_sec,agent_time_valid_jobs,env_size_avg_gb,env_valid_jobs,"
    "agent_tokens_input_sum,agent_tokens_output_sum,agent_tokens_total_sum,agent_tokens_total_avg"
).split(",")

# Current attempts of alpha: t1 attempt 2, t2 attempt 1, t3 attempt 2 (the rerun; attempt 3 is
# an infra error and does not erase it). t4 was only interrupted. beta has no scored attempt.
ALPHA = {
    "run_id": "s1", "baseline": "alpha", "job_count": "3",
    "c0_missing_sum": "22",  # 2 + 20; t3's C0 did not run, its unknown count adds nothing
    "c0_total_sum": "60",  # 10 + 20 + 30: canonical totals of every scored trial
    "c0_total_sum_reported": "",  # not recorded by us
    "c0_missing_over_total": "22/60",
    "c1_cpu_denom": "3", "c2_cuda_denom": "2", "c3_single_gpu_denom": "2", "c4_multi_gpu_denom": "2",
    "c1_cpu_success_over_all": "2/3",  # t1, t3 succeed; t2 fails (deps)
    "c2_cuda_success_over_all": "2/2",  # t3 skipped: outside the denominator
    "c3_single_gpu_success_over_all": "0/2",  # t1 agent failure, t2 not run (asset missing)
    "c4_multi_gpu_success_over_all": "0/2",  # t1, t3 lacked GPUs; t2 skipped
    "c1_cpu_success": "2", "c1_cpu_failed": "1", "c1_cpu_skipped": "0",
    "c2_cuda_success": "2", "c2_cuda_failed": "0", "c2_cuda_skipped": "0",
    "c3_single_gpu_success": "0", "c3_single_gpu_failed": "1", "c3_single_gpu_skipped": "1",
    "c4_multi_gpu_success": "0", "c4_multi_gpu_failed": "0", "c4_multi_gpu_skipped": "2",
    "c5_path_sum": "1", "c5_version_sum": "1", "c5_capability_sum": "1",  # t1 (0, 1, 1) + t3 (1, 0, 0)
    "c5_total_sum": "3",
    "agent_wall_time_avg_sec": "75.06",  # (100 + 50.123) / 2 = 75.0615; t2 unknown
    "agent_time_valid_jobs": "2",
    # The release's measure, every file path counted: (3 GiB + 1.5e9 bytes) / 2 = 2360612736 bytes
    # = 2.19849 GiB; our unique-inode figure beside ours below.
    "env_size_avg_gb": "2.198",
    "env_valid_jobs": "2",
    "agent_tokens_input_sum": "1500",  # 1000 + 200 + 300 (t1's infra attempt never counts)
    "agent_tokens_output_sum": "120",  # 100 + 20; t3's output count is unknown
    "agent_tokens_total_sum": "1320",  # (1000 + 100) + (200 + 20): the trials that know both
    "agent_tokens_total_avg": "660.0",  # over those 2
    "agent": "alpha", "c0_not_run": "1",
    "c0_unowned_sum": "1",  # t1's current attempt; t1's infra attempt (5) never counts, the others are unknown
    "c1_cpu_success_over_measured": "2/3", "c1_cpu_hardware": "0", "c1_cpu_not_run": "0",
    "c2_cuda_success_over_measured": "2/2", "c2_cuda_hardware": "0", "c2_cuda_not_run": "0",
    "c3_single_gpu_success_over_measured": "0/1", "c3_single_gpu_hardware": "0", "c3_single_gpu_not_run": "1",
    "c4_multi_gpu_success_over_measured": "",  # nothing measured against the agent
    "c4_multi_gpu_hardware": "2", "c4_multi_gpu_not_run": "0",
    "c5_not_run": "1",  # t2
    "c5_underclaims_sum": "2",  # t1 0 + t3 2
    "stages_missing_assets_sum": "1",  # t2
    "infra_errors": "2",  # t1 attempt 1, t3 attempt 3
    "reruns": "1",  # t3 attempt 2
    "cost_usd_sum": "0.75",  # 0.5 + 0.25; t2's model has no price: unknown, left out, never 0
    "cost_valid_jobs": "2",
    "c5_report_faults_sum": "2",  # t1 2 + t3 0 (t3's superseded attempt's 9 never counts)
    "env_size_unique_avg_gb": "1.466",  # (2 GiB + 1e9 bytes) / 2 = 1573741824 bytes = 1.46566 GiB
    "env_unique_valid_jobs": "2",
}
BETA = {c: "" for c in COLUMNS} | {
    "run_id": "s1", "baseline": "beta", "agent": "beta", "job_count": "0", "infra_errors": "2", "reruns": "0",
    "c0_not_run": "0", "c5_not_run": "0", "agent_time_valid_jobs": "0", "env_valid_jobs": "0", "cost_valid_jobs": "0",
    "env_unique_valid_jobs": "0",
    **{f"{n}_{k}": "0" for n in ("c1_cpu", "c2_cuda", "c3_single_gpu", "c4_multi_gpu")
       for k in ("denom", "success", "failed", "skipped", "hardware", "not_run")},
}


def test_release_columns_come_first_in_the_release_order():
    assert RELEASE_COLUMNS == RELEASE_HEADER
    assert COLUMNS[: len(RELEASE_HEADER)] == RELEASE_HEADER and "agent" in COLUMNS


def test_csv_from_parquet_every_cell_by_hand(tmp_path):
    text = to_csv(summarize(read_trials(write_run(tmp_path))))
    header, *lines = list(csv.reader(io.StringIO(text)))
    assert header == COLUMNS
    assert [dict(zip(header, line)) for line in lines] == [ALPHA, BETA]
    assert sorted(ALPHA) == sorted(COLUMNS)  # the hand-written rows cover every column
