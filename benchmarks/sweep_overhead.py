"""Harness overhead per trial on the demo suite, and wall time at max-concurrent 1 vs 2.

Runs the default demo sweep (heuristic, noop) twice with `rerun` into fresh directories.
Prints, per run: sweep wall seconds; per trial, the median of trial wall minus agent minus
probe time (placement, sandbox start/put/close: the harness inside the trial); and the
sweep-level overhead per trial, (sweep wall x concurrency - sum of agent+probe) / trials,
which adds Ray scheduling and actor start-up.
Usage: python benchmarks/sweep_overhead.py
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's reb_ray, not an installed one

from reb_ray.models.sweep import SweepConfig  # noqa: E402
from reb_ray.results.read import read_trials  # noqa: E402
from reb_ray.sweep.run import run_sweep  # noqa: E402


def measure(concurrency: int) -> None:
    out = Path(tempfile.mkdtemp(prefix="reb-bench-"))
    config = SweepConfig(output=out, max_concurrent=concurrency, rerun=True, sweep_id=f"bench-c{concurrency}")
    result = run_sweep(config, show_progress=False)
    rows = [r for r in read_trials(out).to_pylist() if r["agent_wall_time_s"] is not None]
    if result.infra_errors:
        print(f"max_concurrent={concurrency}: {result.infra_errors} infra error(s) left out")
    work = [(r["agent_wall_time_s"] or 0) + (r["probe_wall_time_s"] or 0) for r in rows]
    inside = [r["trial_wall_time_s"] - w for r, w in zip(rows, work)]
    sweep_level = (result.wall_time_s * concurrency - sum(work)) / len(rows)
    print(f"max_concurrent={concurrency}: sweep wall {result.wall_time_s:.1f} s for {len(rows)} trials; "
          f"in-trial harness overhead median {statistics.median(inside):.2f} s; "
          f"sweep-level overhead per trial {sweep_level:.2f} s; "
          f"median agent {statistics.median(r['agent_wall_time_s'] for r in rows):.1f} s, "
          f"median probe {statistics.median(r['probe_wall_time_s'] for r in rows):.1f} s")


if __name__ == "__main__":
    measure(1)
    measure(2)
