"""benchmarks/analysis.py runs end to end on a small run, prints the ratio to the DuckDB
reference on its own line and finds the report's rates equal to DuckDB's (no timing is
asserted: targets are the benchmark's, reported, never tested)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_analysis_benchmark_agrees_with_duckdb(slow_process, tmp_path):
    done = subprocess.run([sys.executable, "benchmarks/analysis.py", "5", "3", "2", "--stats-only", "--dir", str(tmp_path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line for line in lines if re.fullmatch(r"ratio: terminal report / DuckDB reference = [0-9.]+x", line)]
    assert "  the report's 12 rates equal DuckDB's" in lines
    again = subprocess.run([sys.executable, "benchmarks/analysis.py", "5", "3", "2", "--stats-only", "--dir", str(tmp_path)],
                           capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert again.returncode == 0 and "synthetic run: reused" in again.stdout


def test_analysis_benchmark_exits_non_zero_on_an_error(slow_process, tmp_path):
    (tmp_path / "run" / "trials").mkdir(parents=True)
    (tmp_path / "run" / "trials" / "part-0.parquet").write_text("not parquet")
    done = subprocess.run([sys.executable, "benchmarks/analysis.py", "5", "3", "2", "--stats-only", "--dir", str(tmp_path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 1 and "Error" in done.stderr
