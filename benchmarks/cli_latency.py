"""Command latency: `reb-ray --help`, every sub-command's `--help`, and `reb-ray trial show` on
a 100,000-trial output.

Targets: `--help` (the root's and every command's) under 0.3 s; `trial show` under 1 s on an
output of 100,000 trials (7 stage rows each, the rows of benchmarks/results.py, compacted as a
finished sweep leaves them). Each is a fresh process, as a user runs it (the best of --repeat
runs: the machine's other load only adds); each line ends with the ratio to its target, and the
worst ratio is printed on its own line. `--before DIR` times another checkout's CLI (a
`git worktree` of an older commit) the same way, in the same run, for a before/after.

Usage: python benchmarks/cli_latency.py [--trials N] [--dir DIR] [--repeat K] [--before DIR]
Exits 1 when a command failed (a benchmark that hit an error is no measurement).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

HELP_TARGET_S = 0.3
SHOW_TARGET_S = 1.0
#: The commands whose --help is timed (every command of the app is walked as well, below).
SHOWN_TRIAL = "agent1/task17/0"


def _rows_module():
    spec = importlib.util.spec_from_file_location("bench_results_rows", ROOT / "benchmarks" / "results.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_output(out: Path, n: int) -> None:
    """`n` trials with their stage rows, written through the sink in batches and compacted."""
    from reb_ray.results.compact import compact
    from reb_ray.results.parquet_sink import ParquetSink

    rows = _rows_module()
    sink = ParquetSink(out)
    for start in range(0, n, 1000):
        ids = range(start, min(n, start + 1000))
        sink.write([rows.trial_row(i) for i in ids], [s for i in ids for s in rows.stage_rows(i)])
    sink.close()
    compact(out)


def command_paths() -> list[list[str]]:
    """Every command of the real app, as argv prefixes (the root is [])."""
    import typer

    from reb_ray.cli import app

    paths: list[list[str]] = [[]]

    def walk(command, path):
        for name, sub in getattr(command, "commands", {}).items():
            paths.append([*path, name])
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return paths


#: CPU seconds (user + system) of the best run of each command, beside its wall seconds: on a
#: machine shared with other work the wall time is inflated by waiting for a core, the CPU time
#: is what the command itself costs (on an idle machine the two are close: it runs on one core).
CPU: dict[str, float] = {}


def timed(argv: list[str], cwd: Path, repeat: int) -> float:
    """The best wall seconds of `repeat` runs of `argv` (its CPU seconds into CPU); raises
    SystemExit(1) when it fails."""
    import resource

    best = float("inf")
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        key = " ".join(argv[3:])
        CPU[key] = min(CPU.get(key, float("inf")), cpu)
        best = min(best, wall)
        if done.returncode != 0:
            print(f"error: {' '.join(argv[3:])} exited {done.returncode}: {done.stderr.strip()[-300:]}")
            raise SystemExit(1)
    return best


def measure(source: Path, out: Path, repeat: int, label: str) -> float:
    """Time the CLI of the checkout at `source`; prints a line per command; returns the worst ratio."""
    cli = [sys.executable, "-c", "import sys; sys.path.insert(0, '.'); from reb_ray.cli import main; main()"]
    helps = {}
    for path in command_paths():
        probe = subprocess.run([*cli, *path, "--help"], cwd=source, capture_output=True, text=True)
        if probe.returncode != 0 and "No such command" in probe.stderr:  # a command newer than that checkout
            continue
        helps[" ".join(path) or "(root)"] = timed([*cli, *path, "--help"], source, repeat)
    slowest = max(helps, key=helps.get)
    def cpu(*args: str) -> float:
        return CPU[" ".join(args)]

    print(f"[{label}] reb-ray --help: {helps['(root)']:.3f} s wall, {cpu('--help'):.3f} s CPU "
          f"(target {HELP_TARGET_S} s, ratio {helps['(root)'] / HELP_TARGET_S:.2f} wall, {cpu('--help') / HELP_TARGET_S:.2f} CPU)")
    print(f"[{label}] slowest sub-command --help: `{slowest} --help` {helps[slowest]:.3f} s wall, "
          f"{cpu(*slowest.split(), '--help'):.3f} s CPU; median of {len(helps)}: {sorted(helps.values())[len(helps) // 2]:.3f} s wall")
    worst_help_cpu = max(cpu(*([] if p == "(root)" else p.split()), "--help") for p in helps)
    show = timed([*cli, "trial", "show", str(out), SHOWN_TRIAL], source, repeat)
    show_cpu = cpu("trial", "show", str(out), SHOWN_TRIAL)
    print(f"[{label}] reb-ray trial show on the 100k-trial output: {show:.3f} s wall, {show_cpu:.3f} s CPU "
          f"(target {SHOW_TARGET_S} s, ratio {show / SHOW_TARGET_S:.2f} wall, {show_cpu / SHOW_TARGET_S:.2f} CPU)")
    print(f"[{label}] worst ratio, CPU time: {max(worst_help_cpu / HELP_TARGET_S, show_cpu / SHOW_TARGET_S):.2f}; "
          f"os.getloadavg() {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPU(s)")
    return max(helps[slowest] / HELP_TARGET_S, show / SHOW_TARGET_S)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100_000)
    parser.add_argument("--dir", type=Path, default=None, help="where the output is (made when absent; reused when there)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--before", type=Path, default=None, help="another checkout to time the same way")
    args = parser.parse_args()
    out = (args.dir or Path(tempfile.mkdtemp(prefix="reb-bench-cli-"))) / "run"
    if not (out / "trials").is_dir():
        started = time.perf_counter()
        make_output(out, args.trials)
        print(f"wrote {args.trials} trials under {out} in {time.perf_counter() - started:.1f} s")
    if args.before is not None:
        before = measure(args.before.resolve(), out, args.repeat, "before")
        print(f"before: worst ratio to target {before:.2f}")
    ratio = measure(ROOT, out, args.repeat, "now")
    print("worst ratio to target, wall time (<= 1 meets every target):")
    print(f"{ratio:.2f}")


if __name__ == "__main__":
    main()
