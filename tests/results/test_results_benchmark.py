"""benchmarks/results.py runs end to end on a small run and its resume check is right (no
timing is asserted: the targets are benchmark targets, reported, never tested)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_results_benchmark_small_run(slow_process, tmp_path):
    done = subprocess.run([sys.executable, "benchmarks/results.py", "--trials", "300", "--dir", str(tmp_path / "work")],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    resume = [line for line in lines if line.startswith("resume 300 trials:")]
    assert len(resume) == 2 and all("(285 scored, 300 trials: ok)" in line for line in resume)
    assert any("files after compaction: 3 (before: " in line for line in lines)
    assert [line.split(":")[0] for line in lines if line.startswith("reader ")] == \
        ["reader pyarrow", "reader pandas", "reader polars", "reader duckdb"]
    assert any(line.startswith("sink: ") and "trial rows/s batched" in line for line in lines)
    again = subprocess.run([sys.executable, "benchmarks/results.py", "--trials", "10", "--dir", str(tmp_path / "work")],
                           capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert again.returncode != 0 and "not empty" in again.stderr
