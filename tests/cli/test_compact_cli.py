"""`reb-ray compact RUN_DIR` on a run written before issue 12 (one file per attempt)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd

from reb_ray.results.parquet_sink import ParquetSink
from reb_ray.results.read import read_stages, read_trials
from tests.results.runs import data_files, rich_stages, rich_trial, sorted_rows, write_legacy
from tests.cli.in_process import run_cli

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return run_cli(*args, cwd=ROOT)


def test_compact_converts_a_legacy_run(tmp_path):
    write_legacy(tmp_path, [rich_trial(n) for n in range(30)], [s for n in range(30) for s in rich_stages(n)])
    trials, stages = sorted_rows(read_trials(tmp_path)), sorted_rows(read_stages(tmp_path))
    assert len(data_files(tmp_path)) == 60
    done = _cli("compact", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "sweep s1: 60 -> 3 files (trials 30 rows, stages 90 rows)"
    assert len(data_files(tmp_path)) == 3
    assert sorted_rows(read_trials(tmp_path)) == trials and sorted_rows(read_stages(tmp_path)) == stages
    assert len(pd.read_parquet(tmp_path / "trials")) == 30  # the converted run reads directly
    again = _cli("compact", str(tmp_path), "--sweep-id", "s1")
    assert again.stdout.strip() == "sweep s1: 3 -> 3 files (nothing to rewrite)"


def test_compact_errors_are_one_line(tmp_path):
    missing = _cli("compact", str(tmp_path))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1
    assert "no trials/ or stages/ dataset here" in missing.stderr
    with ParquetSink(tmp_path) as sink:
        sink.write([rich_trial(1)], [])
        busy = _cli("compact", str(tmp_path))  # the open sink holds the run lock
    assert busy.returncode == 2 and "writing results there" in busy.stderr and busy.stderr.count("\n") == 1
    assert _cli("compact", str(tmp_path)).returncode == 0
