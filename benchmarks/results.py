"""The results store at scale: sink, compaction, resume and four readers.

Writes N trials (default 100,000; each with 7 stage rows, realistic columns of schema.py) through
ParquetSink in batches of 1,000 trials per write (the row dicts are built before the clock
starts; once with their stage rows, once trial rows alone), compacts the run, runs the resume check (what `reb-ray sweep` does before it starts:
scored_trial_ids + last_attempts) in a fresh process for its time and peak RSS, and reads both
datasets with pyarrow.dataset, pandas, polars and duckdb, each against the same library reading
the same rows from one file written by one pyarrow write (also timed). Also times one write per
trial (as a sweep calls it) over the first 5,000 trials. Targets: sink >= 50,000
trial rows/s batched; resume < 2 s and < 500 MB; < 100 files per 100,000 trials after
compaction; each reader within 3x of one file.

Usage: python benchmarks/results.py [--trials N] [--dir DIR]
"""

from __future__ import annotations

import argparse
import datetime as dt
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reb_ray.results.compact import compact  # noqa: E402
from reb_ray.results.parquet_sink import ParquetSink, rows_to_table  # noqa: E402
from reb_ray.results.schema import STAGES_SCHEMA, TRIALS_SCHEMA  # noqa: E402

SWEEP = "bench-results"
BATCH = 1_000
STAGES = ("agent", "report", "c0", "c1", "c2", "c3", "c4")
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
TAIL = "Successfully installed torch-2.3.1 numpy-1.26.4 ... " * 12  # ~600 bytes, as agent output tails are
PYRIGHT = '{"generalDiagnostics": [{"rule": "reportMissingImports", "message": "Import \\"apex\\" could not be resolved"}]}'


def trial_row(n: int) -> dict:
    infra = n % 20 == 0
    return {
        "sweep_id": SWEEP, "trial_id": f"agent{n % 4}/task{n // 4 % 5000}/{n // 20000}", "attempt": 1,
        "trial_index": n // 20000, "task_id": f"task{n // 4 % 5000}", "suite": "researchenvbench", "agent": f"agent{n % 4}",
        "status": "infra_error" if infra else "scored", "failure_owner": "infra" if infra else ("agent" if n % 4 == 0 or n % 5 == 0 else None),
        "failure_reason": "docker daemon unreachable" if infra else None, "node": f"node{n % 16}", "sandbox_provider": "docker",
        "repo_commit": f"{n:040x}", "report_status": "ok", "report_python_path": "/opt/venv/bin/python",
        "c0_status": "success", "c0_missing": n % 9, "c0_total": 65, "c0_missing_modules": ["apex", "deepspeed"][: n % 3],
        "pyright_version": "1.1.414", "c1_status": "success" if n % 4 else "failure", "c1_exit_code": 0 if n % 4 else 1,
        "c1_failure_category": None if n % 4 else "deps", "agent_exit_code": 0, "agent_timed_out": False,
        "agent_wall_time_s": 1800.0 + n % 600, "probe_wall_time_s": 420.5, "trial_wall_time_s": 2260.0 + n % 600,
        "env_size_bytes": 4_000_000_000 + n, "env_size_apparent_bytes": 4_100_000_000 + n, "agent_output_tail": TAIL,
        "started_at": T0 + dt.timedelta(seconds=n), "finished_at": T0 + dt.timedelta(seconds=n + 2260),
        "failure_category": "infra_daemon" if infra else None, "repo_modified": False,
        "c2_status": "success", "c2_torch_version": "2.3.1", "c2_cuda_build": "12.1", "c2_device_count": 2,
        "c3_status": "success", "c3_exit_code": 0, "c4_status": "failure" if n % 5 == 0 else "success",
        "c4_exit_code": None if n % 7 == 0 else 0, "gpus_assigned": 2, "c5_status": "success", "c5_path": 0, "c5_version": n % 2,
        "c5_capability": 0, "c5_underclaims": 0, "prompt_sha256": f"{n * 7919:064x}", "agent_kind": "claude_code",
        "agent_model": "claude-sonnet-4-5", "input_tokens": 250_000 + n, "output_tokens": 12_000 + n % 1000,
        "cost_usd": None if n % 11 == 0 else 0.93, "cost_source": "price_table", "llm_requests": 80 + n % 40,
    }


def stage_rows(n: int) -> list[dict]:
    trial_id = f"agent{n % 4}/task{n // 4 % 5000}/{n // 20000}"
    return [{"sweep_id": SWEEP, "trial_id": trial_id, "attempt": 1, "task_id": f"task{n // 4 % 5000}", "agent": f"agent{n % 4}",
             "stage": stage, "status": "success" if (n + i) % 4 else "failure", "exit_code": None if stage == "report" else (n + i) % 2,
             "timed_out": False, "duration_s": 12.5 + i, "command": f"python -m probes.{stage} --task task{n % 5000}",
             "log_head": f"[{stage}] starting run {n}\n" * 4, "log_tail": f"[{stage}] finished with code {(n + i) % 2}\n" * 4,
             "raw": PYRIGHT if stage == "c0" else None, "started_at": T0 + dt.timedelta(seconds=n + i),
             "output_truncated": False, "output_dropped_bytes": 0, "log_path": f"artifacts/sweep_id={SWEEP}/{n}/1/{stage}.log.gz",
             "log_cut_bytes": 0}
            for i, stage in enumerate(STAGES)]


# Peak RSS from /proc/self/status VmHWM: getrusage's ru_maxrss survives exec, so a child would
# report this (large) benchmark process's size.
PEAK = "int(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1]) / 1024"

RESUME = """
import sys, time
from pathlib import Path
started = time.perf_counter()
from reb_ray.results.read import last_attempts, scored_trial_ids
imported = time.perf_counter()
scored = scored_trial_ids(Path(sys.argv[1]), sys.argv[2])
last = last_attempts(Path(sys.argv[1]), sys.argv[2])
done = time.perf_counter()
print(done - imported, len(scored), len(last), PEAK)
""".replace("PEAK", PEAK)

ONE_FILE_RESUME = """
import sys, time
import pyarrow.parquet as pq
from reb_ray.results.read import latest_attempts
started = time.perf_counter()
latest = latest_attempts(pq.read_table(sys.argv[1], columns=["sweep_id", "trial_id", "attempt", "status"]))
print(time.perf_counter() - started, PEAK)
""".replace("PEAK", PEAK)


def resume_check(out: Path, n: int) -> str:
    line = subprocess.run([sys.executable, "-c", RESUME, str(out), SWEEP], capture_output=True, text=True, check=True,
                          cwd=ROOT).stdout.split()
    seconds, scored, trials, rss = float(line[0]), int(line[1]), int(line[2]), float(line[3])
    expected = n - len(range(0, n, 20))
    ok = "ok" if (scored, trials) == (expected, n) else f"WRONG: expected {expected} scored of {n}"
    return f"resume {n} trials: {seconds:.2f} s, peak RSS {rss:.0f} MB ({scored} scored, {trials} trials: {ok})"


def files(out: Path) -> int:
    return sum(1 for d in ("trials", "stages", "index") for p in (out / d).rglob("*.parquet"))


def readers() -> dict:
    import duckdb
    import pandas as pd
    import polars as pl
    import pyarrow.dataset as ds

    def duck(path: str) -> pa.Table:
        result = duckdb.sql(f"SELECT * FROM read_parquet('{path}')").arrow()
        return result.read_all() if isinstance(result, pa.RecordBatchReader) else result

    return {  # each: (read a dataset directory, read one file)
        "pyarrow": (lambda d: ds.dataset(d, format="parquet").to_table(), lambda f: ds.dataset(f, format="parquet").to_table()),
        "pandas": (pd.read_parquet, pd.read_parquet),
        "polars": (pl.read_parquet, pl.read_parquet),
        "duckdb": (lambda d: duck(f"{d}/**/*.parquet"), lambda f: duck(str(f))),
    }


def timed(fn, *args) -> tuple[float, object]:
    started = time.perf_counter()
    result = fn(*args)
    return time.perf_counter() - started, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100_000)
    parser.add_argument("--dir", type=Path, default=None, help="work directory (default: a new temporary one)")
    args = parser.parse_args()
    n = args.trials
    work = args.dir or Path(tempfile.mkdtemp(prefix="reb-bench-results-"))
    out, single = work / "run", work / "one-file"
    if work.exists() and any(work.iterdir()) and args.dir is not None:
        raise SystemExit(f"--dir {work}: not empty (the sink appends: earlier rows would be counted twice)")
    single.mkdir(parents=True, exist_ok=True)
    print(f"{n} trials, {n * len(STAGES)} stage rows, under {work}")

    per_trial = min(n, 5_000)
    rows = [([trial_row(i)], stage_rows(i)) for i in range(per_trial)]
    elapsed, _ = timed(lambda: _write_each(work / "per-trial", rows))
    print(f"sink, one write per trial: {per_trial / elapsed:,.0f} trial rows/s ({per_trial} trials, {elapsed:.2f} s)")
    del rows

    batches = []
    for start in range(0, n, BATCH):
        ids = range(start, min(n, start + BATCH))
        batches.append(([trial_row(i) for i in ids], [s for i in ids for s in stage_rows(i)]))
    sink = ParquetSink(out)
    started = time.perf_counter()
    for trial_rows, stages in batches:
        sink.write(trial_rows, stages)
    sink.close()
    elapsed = time.perf_counter() - started
    print(f"sink: {n / elapsed:,.0f} trial rows/s batched ({BATCH} trials per write, {elapsed:.2f} s;"
          f" with {n * len(STAGES):,} stage rows); files before compaction: {files(out)}")

    sink = ParquetSink(work / "trial-rows-only")
    started = time.perf_counter()
    for trial_rows, _ in batches:
        sink.write(trial_rows, [])
    sink.close()
    alone = time.perf_counter() - started
    print(f"sink: {n / alone:,.0f} trial rows/s batched, trial rows alone ({alone:.2f} s)")

    trials = pa.concat_tables([rows_to_table(t, TRIALS_SCHEMA) for t, _ in batches])
    stages = pa.concat_tables([rows_to_table(s, STAGES_SCHEMA) for _, s in batches])
    del batches
    started = time.perf_counter()
    pq.write_table(trials, single / "trials.parquet")
    pq.write_table(stages, single / "stages.parquet")
    one_write = time.perf_counter() - started
    print(f"one pyarrow write of the same rows, already tables: {n / one_write:,.0f} trial rows/s ({one_write:.2f} s);"
          f" sink / one write: {elapsed / one_write:.1f}x (the sink also converts row dicts and writes the index)")
    del trials, stages

    print(resume_check(out, n) + "  [before compaction]")
    started = time.perf_counter()
    result = compact(out)
    elapsed = time.perf_counter() - started
    print(f"compaction: {elapsed:.2f} s; files after compaction: {files(out)} (before: {result.files_before})")
    print(resume_check(out, n))
    line = subprocess.run([sys.executable, "-c", ONE_FILE_RESUME, str(single / "trials.parquet")], capture_output=True,
                          text=True, check=True, cwd=ROOT).stdout.split()
    print(f"resume from one file (4 columns + latest_attempts): {float(line[0]):.2f} s, peak RSS {float(line[1]):.0f} MB")

    for name, (read_dir, read_file) in readers().items():
        run_s = sum(timed(read_dir, out / d)[0] for d in ("trials", "stages"))
        one_s = sum(timed(read_file, single / f"{d}.parquet")[0] for d in ("trials", "stages"))
        print(f"reader {name}: {run_s / one_s:.2f} x one file ({run_s:.2f} s against {one_s:.2f} s, trials + stages)")


def _write_each(out: Path, rows: list[tuple[list[dict], list[dict]]]) -> None:
    with ParquetSink(out) as sink:
        for trial_rows, stages in rows:
            sink.write(trial_rows, stages)


if __name__ == "__main__":
    main()
