"""The env-size probe measures both figures in one walk: the release's (every file path counted,
a hard-linked file once per path) and ours (each inode once). Real venv, real files, real links."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

from analysis.scores import summarize
from reb_ray.results.rows import rows_to_table
from reb_ray.results.schema import TRIALS_SCHEMA

PROBE = Path(__file__).resolve().parents[2] / "probes" / "env_size.py"
MiB = 2**20


def test_a_hard_link_counts_twice_for_the_release_and_once_for_us(tmp_path):
    prefix = tmp_path / "env"
    venv.create(prefix, with_pip=False, symlinks=True)
    big = prefix / "lib" / "weights.bin"
    big.write_bytes(os.urandom(16 * MiB))
    os.link(big, prefix / "weights.link")  # the same inode at a second path
    os.symlink(big, prefix / "weights.symlink")  # a symlink is not followed: counted by neither
    out = subprocess.run([sys.executable, str(PROBE), str(prefix / "bin" / "python")], capture_output=True, text=True,
                         timeout=120, check=True)
    data = json.loads(out.stdout.strip().splitlines()[-1])
    assert Path(data["prefix"]).resolve() == prefix.resolve()
    rest = data["unique_bytes"] - 16 * MiB  # the venv's own small files (pyvenv.cfg, activate scripts)
    assert 0 < rest < MiB
    assert data["apparent_bytes"] == 2 * 16 * MiB + rest


def test_the_paper_column_is_the_release_figure_and_ours_follows(tmp_path):
    """Two trials: 32 MiB of paths over 16 MiB of inodes, and 2 GiB plain."""
    base = {"sweep_id": "s", "attempt": 1, "status": "scored", "agent": "a", "task_id": "t", "env_size_status": "success"}
    rows = [dict(base, trial_id="a/t/0", env_size_bytes=16 * MiB, env_size_apparent_bytes=32 * MiB),
            dict(base, trial_id="a/t/1", env_size_bytes=2**31, env_size_apparent_bytes=2**31)]
    [summary] = summarize(rows_to_table(rows, TRIALS_SCHEMA))
    assert summary["env_size_avg_gb"] == round((32 * MiB + 2**31) / 2 / 2**30, 3) == 1.016
    assert summary["env_size_unique_avg_gb"] == round((16 * MiB + 2**31) / 2 / 2**30, 3) == 1.008
    assert summary["env_valid_jobs"] == summary["env_unique_valid_jobs"] == 2
