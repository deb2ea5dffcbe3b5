"""The paper's table of a run for the viewer, computed in a child process.

The numbers are the terminal summary's: `analysis.scores.summarize` formatted by
`analysis.summary.row_cells` (the HTML report's cells too), then the success rates with their
95% intervals and pass@k (`analysis.statistics.run_statistics` formatted by
`analysis.sections.rates` / `pass_k`, the strings `reb-ray report` prints). Nothing is computed
here but the call.

Why a child process: at 100,000 trials these computations turn every current attempt into a
Python dict and resample tasks 2,000 times (seconds, and over 1 GB at their peak). Run in the
server they would hold its memory at that peak for the life of the process; run apart, the
server keeps only the formatted strings (kilobytes), and pages answer while the numbers are
computed. Only the trials columns the computations read are loaded (SUMMARY_COLUMNS).

Run as `python -m reb_ray.viewer.summary OUTPUT`: prints one JSON object (`compute`).
`reb-ray view` starts the first one (`launch`) before it imports the server, so the child's
start-up and the server's overlap: the table is ready about a second and a half sooner.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

#: The trials columns summarize and run_statistics read (the others read as absent).
EXTRA_COLUMNS = ("c0_unowned", "stages_missing_assets", "rerun", "c5_report_faults")


def _peak_mb() -> float | None:
    """This process's peak resident memory (VmHWM), MB; None where /proc is missing."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmHWM"))
    except (OSError, StopIteration):
        return None


def launch(output_dir: Path) -> subprocess.Popen:
    """This module run as a child on `output_dir`, its JSON on the child's stdout."""
    from reb_ray.viewer.child import start

    return start("reb_ray.viewer.summary", str(output_dir))


def compute(output_dir: Path) -> dict:
    """{"headers", "legend", "sweeps": [{"id", "rows" (summary cells per agent), "rates",
    "pass_k" (sections as {"head", "headers", "rows"}, pass_k null when no task has two
    trials)}], "seconds", "peak_mb", "attempts", "snapshot" (the trials files as found before
    reading them, `Run.snapshot`: what the numbers were computed from)}."""
    from analysis.estimators import RESAMPLES
    from analysis.outcomes import COLUMNS
    from analysis.scores import summarize
    from analysis.sections import agents_of, pass_k, rates
    from analysis.statistics import run_statistics
    from analysis.summary import HEADERS, LEGEND, row_cells
    from reb_ray.results.read import read_trials
    from reb_ray.viewer.data import Run

    started = time.perf_counter()
    snapshot = Run(Path(output_dir)).snapshot()
    columns = list(dict.fromkeys([*COLUMNS, *EXTRA_COLUMNS]))
    trials = read_trials(Path(output_dir), columns=columns)
    rows = summarize(trials)
    stats = run_statistics(trials, seed=0, resamples=RESAMPLES)
    analysis = SimpleNamespace(stats=stats, seed=0, resamples=RESAMPLES)  # what rates and pass_k read
    sweeps = []
    for sweep_id in sorted({r["run_id"] for r in rows}, key=lambda s: (s is None, s or "")):
        agents = agents_of(analysis, sweep_id)
        sections = {}
        for key, make in (("rates", rates), ("pass_k", pass_k)):
            section = make(analysis, sweep_id, agents) if agents else None
            sections[key] = None if section is None else {"head": section.head, "headers": section.headers,
                                                          "rows": section.rows}
        sweeps.append({"id": sweep_id, "rows": [row_cells(r) for r in rows if r["run_id"] == sweep_id], **sections})
    return {"headers": list(HEADERS), "legend": LEGEND, "sweeps": sweeps, "attempts": trials.num_rows,
            "seconds": round(time.perf_counter() - started, 3), "peak_mb": _peak_mb(), "snapshot": snapshot}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m reb_ray.viewer.summary OUTPUT", file=sys.stderr)
        return 2
    from reb_ray.errors import RebRayError

    try:
        result = compute(Path(argv[0]))
    except RebRayError as exc:
        print(json.dumps({"error": str(exc)}))
        return 0
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
