"""`reb-ray view` on a large run: page times and the server's memory.

Writes a synthetic run of N trials (default 100,000) with 8 stage rows each (800,000 stage rows)
through the real ParquetSink, with the rows of benchmarks/results.py (realistic columns, output
tails, log heads and tails; an `env_size` stage added to its seven), then starts `reb-ray view`
as its own process and fetches over HTTP, timing each answer (seconds, wall):

- the first page (`/`) on a cold server; then the time until the paper's table (computed in a
  child process) is on it, and that child's peak RSS; every picture on the overview fetched;
- the matrix, unfiltered, first (the matrix base is built on the first request);
- a filtered matrix page (an agent, a highest stage, a cost range, page 3), best of 5;
- a trial page (stages, report, trajectory, logs) of a trial in the middle, best of 5; and a
  different trial each time, worst of 5;
- the server's peak RSS (VmHWM of its process) after all of that.

Targets: first page < 2 s, the paper's table < 3 s with the child under 1 GB, a filtered matrix
page or a trial page < 0.5 s, the server < 500 MB. Exits 1 when a page shows an error (the
overview's "could not be computed", a picture that is no SVG): its times would be an error's.

Usage: python benchmarks/viewer.py [--trials N] [--dir DIR] [--port P]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.results import SWEEP, stage_rows, trial_row  # noqa: E402
from reb_ray.results.parquet_sink import ParquetSink  # noqa: E402

BATCH = 1_000


def viewer_stage_rows(n: int) -> list[dict]:
    """benchmarks/results.py's seven stage rows of trial `n`, and an `env_size` row."""
    rows = stage_rows(n)
    return rows + [{**rows[0], "stage": "env_size", "status": "success", "command": None}]


def write_run(out: Path, n: int) -> None:
    with ParquetSink(out) as sink:
        for start in range(0, n, BATCH):
            ids = range(start, min(n, start + BATCH))
            sink.write([trial_row(i) for i in ids], [s for i in ids for s in viewer_stage_rows(i)])


def fetch(base: str, path: str) -> tuple[float, str]:
    started = time.perf_counter()
    with urllib.request.urlopen(base + path, timeout=300) as r:
        body = r.read().decode()
    return time.perf_counter() - started, body


def peak_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmHWM"))


def main() -> int:
    """Run the benchmark; 1 when a page showed an error (the numbers would time an error page)."""
    errors: list[str] = []
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100_000)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--port", type=int, default=8799)
    args = parser.parse_args()
    work = args.dir or Path(tempfile.mkdtemp(prefix="reb-bench-viewer-"))
    out = work / "run"
    if not (out / "trials").is_dir():
        started = time.perf_counter()
        write_run(out, args.trials)
        print(f"wrote {args.trials:,} trials, {8 * args.trials:,} stage rows under {out} in {time.perf_counter() - started:.1f} s")
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    launched = time.monotonic()
    server = subprocess.Popen([sys.executable, "-c", "from reb_ray.cli import main; main()", "view", str(out),
                               "--port", str(args.port)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{args.port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(base + "/static/viewer.css", timeout=5).read()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit(f"the server did not start: {server.stdout.read().decode()[-2000:]}")
                time.sleep(0.2)
        started = time.monotonic()
        first, _ = fetch(base, "/")
        print(f"first page (/), cold: {first:.3f} s  [target < 2 s]")
        while True:
            _, body = fetch(base, "/")
            if "Table computed" in body or "could not be computed" in body:
                break
            time.sleep(0.1)
        ready = time.monotonic() - started
        from_launch = time.monotonic() - launched
        if "could not be computed" in body:
            errors.append("the overview says the paper's table could not be computed: "
                          + re.sub(r"<[^>]+>", "", body.split("could not be computed", 1)[1])[:300].strip())
        child = re.search(r'id="summary-peak">([^<]*)<', body)
        if child is None:
            errors.append("the overview shows no peak memory of the summary process")
        print(f"paper's table on the page after {ready:.1f} s (child process peak "
              f"{child.group(1) if child else '?'} MB)  [target < 3 s, < 1 GB]")
        print(f"paper's table on the page {from_launch:.1f} s after `reb-ray view` was started")
        images = re.findall(r'<img[^>]+src="(/plot[^"]*)"', body)
        for src in images:
            t, svg = fetch(base, src.replace("&amp;", "&"))
            if "<svg" not in svg:
                errors.append(f"picture {src} is not an SVG")
        if images:
            print(f"overview pictures: {len(images)} SVGs, each fetched")
        t, _ = fetch(base, f"/matrix?{urlencode({'sweep': SWEEP})}")
        print(f"matrix, unfiltered, first request (builds the base): {t:.3f} s")
        query = urlencode({"sweep": SWEEP, "agent": "agent1", "reached": "4", "cost_min": "0.5", "page": 3})
        times = [fetch(base, f"/matrix?{query}")[0] for _ in range(5)]
        _, body = fetch(base, f"/matrix?{query}")
        counts = re.search(r'id="counts">([^.]*)\.', body)
        print(f"filtered matrix page: best {min(times):.3f} s, worst {max(times):.3f} s ({counts.group(1) if counts else '?'})"
              "  [target < 0.5 s]")
        middle = args.trials // 2
        trial_id = f"agent{middle % 4}/task{middle // 4 % 5000}/{middle // 20000}"
        times = [fetch(base, f"/trial?{urlencode({'sweep': SWEEP, 'id': trial_id})}")[0] for _ in range(5)]
        print(f"trial page ({trial_id}): best {min(times):.3f} s, worst {max(times):.3f} s  [target < 0.5 s]")
        others = [f"agent{k % 4}/task{k // 4 % 5000}/{k // 20000}" for k in (k % args.trials for k in (7, 25_013, 50_021, 75_033, args.trials - 3))]
        times = [fetch(base, f"/trial?{urlencode({'sweep': SWEEP, 'id': t})}")[0] for t in others]
        print(f"trial pages of 5 different trials: worst {max(times):.3f} s")
        print(f"server peak RSS: {peak_mb(server.pid):.0f} MB  [target < 500 MB]")
    finally:
        server.terminate()
        server.wait(30)
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
