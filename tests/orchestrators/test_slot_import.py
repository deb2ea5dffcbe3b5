"""A slot worker's start-up imports: what every one of a sweep's slot actors pays before it is ready.

A sweep starts one actor per sandbox slot (64 GPUs: 64+ processes), and each imports the slot
worker's module before it answers; the results stack (pyarrow, pandas) and the aiohttp servers
are not needed to run a trial there and cost about 0.6 s of CPU per process, so they must not be
loaded by that import.
"""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("pyarrow", "pandas", "aiohttp")


def test_slot_worker_module_loads_no_results_stack_or_http_server():
    code = ("import sys, reb_ray.orchestrators.slot_pool, reb_ray.trial.run; "
            f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "", f"slot worker import loads {out.stdout.strip()}"
