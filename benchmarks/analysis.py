"""Analysis time for a synthetic run: load + statistics.

Writes a synthetic run through the real ParquetSink (reb_ray/testing/synthetic.py: every trial
with its stage rows, each C1..C4 row with a LOG_CHARS-character log head and tail, one shard
per attempt as workers write them), then times, best of REPEATS, in seconds:

- load: read_trials + read_stages (the analysis columns only), as `reb-ray report` reads;
- current: `analysis.load.load_trials` (the latest scored attempt per trial);
- statistics: `analysis.statistics.run_statistics` (grouping, rates with Wilson or 2,000-resample
  task bootstrap intervals, pass@k, C0);
- comparisons: every pair of agents on every stage (paired bootstrap + McNemar);
- analysis: `analysis.analyze.analyze` (statistics, cost, frontiers, findings, failures, C5);
- report: the whole terminal report text (`analysis.terminal.format_report`, reads included);
- plots: the four PNGs of `analysis.plots.write_plots` (when matplotlib is installed);
- html: `analysis.report_html.write_html` given the trials read, the stages read with the
  drill-down's columns (log heads and tails: timed apart as "load for html") and the analysis:
  its plots, the drill-down of every trial and the template, and the file's size.

The layout is the sink's (one write per attempt, rolled into parts by size or time) unless
--one-shard, which writes the whole run in one write call (what a compacted sweep reads like).

- the DuckDB reference: one SQL query over the same part files computing the same per-agent,
  per-stage success counts (the current attempt per trial, scored only; success and applicable
  rows of C1..C4), best of REPEATS; the report's numbers must equal it (else exit 1), and the
  ratio of the terminal report's time to it is printed on its own line.

--stats-only stops after the terminal report (no plots, no HTML): the 100,000-trial target is
the terminal report, reads included, in at most 3 s (e.g. 44 6 379: 100,056 trials).
--dir DIR keeps the synthetic run in DIR/run and reuses it when it is there (the write takes
minutes at 100,000 trials).

Exits 1 when a step raised or the report's rates differ from the DuckDB reference.

Usage: python benchmarks/analysis.py [TASKS AGENTS TRIALS] [--one-shard] [--stats-only] [--dir DIR]
(default 44 6 5: 1,320 trials)
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[0] = str(ROOT)  # this file is benchmarks/analysis.py: never let it shadow the analysis package

from analysis.analyze import STAGE_COLUMNS, analyze  # noqa: E402
from analysis.load import load_trials  # noqa: E402
from analysis.statistics import all_comparisons, run_statistics  # noqa: E402
from analysis.terminal import format_report  # noqa: E402
from analysis.scores import summarize  # noqa: E402
from reb_ray.results.layout import TRIALS_DIR, part_files  # noqa: E402
from reb_ray.results.read import read_stages, read_trials  # noqa: E402
from reb_ray.results.parquet_sink import ParquetSink  # noqa: E402
from reb_ray.testing.synthetic import random_rows, write  # noqa: E402

REPEATS = 3
#: Characters of each C1..C4 stage row's log head and of its tail (the sink keeps up to 64 KiB of each).
LOG_CHARS = 8192


class Seconds(float):
    """Wall seconds, printed with the process's CPU seconds beside them (the machine may be
    shared: CPU time is what the analysis itself costs)."""

    cpu: float = 0.0

    def __format__(self, spec: str) -> str:
        return f"{format(float(self), spec)} s wall, {format(self.cpu, spec)} s CPU"


def best(fn, repeats: int = REPEATS):
    """(fastest of `repeats` calls as Seconds, last result)."""
    times, result = [], None
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        result = fn()
        sec = Seconds(time.perf_counter() - t)
        sec.cpu = time.process_time() - c
        times.append(sec)
    return min(times), result


#: Per (sweep, agent, stage C1..C4): successes and applicable trials of the current scored
#: attempts, the current attempt being a trial's highest scored attempt, else its highest
#: (reb_ray.results.read.latest_attempts); "applicable": a status other than skipped.
DUCKDB_RATES = """
WITH current AS (
  SELECT * FROM read_parquet($files, union_by_name = true)
  QUALIFY row_number() OVER (PARTITION BY sweep_id, trial_id
                             ORDER BY (status = 'scored') DESC, attempt DESC NULLS LAST) = 1
), outcomes AS (
  UNPIVOT (SELECT sweep_id, agent, c1_status, c2_status, c3_status, c4_status FROM current WHERE status = 'scored')
  ON c1_status AS 'c1', c2_status AS 'c2', c3_status AS 'c3', c4_status AS 'c4' INTO NAME stage VALUE outcome
)
SELECT sweep_id, agent, stage, count(*) FILTER (outcome = 'success') AS successes,
       count(*) FILTER (outcome <> 'skipped') AS applicable
FROM outcomes GROUP BY ALL ORDER BY ALL
"""


def duckdb_rates(out: Path) -> dict[tuple, tuple[int, int]]:
    """{(sweep_id, agent, stage): (successes, applicable)} by DUCKDB_RATES over the part files
    the readers read."""
    import duckdb

    files = [str(p) for p in part_files(out / TRIALS_DIR, None)]
    rows = duckdb.connect().execute(DUCKDB_RATES, {"files": files}).fetchall()
    return {(s, a, stage): (ok, n) for s, a, stage, ok, n in rows}


def report_rates(trials) -> dict[tuple, tuple[int, int]]:
    """The same counts from the report's summary rows (analysis.scores.summarize)."""
    stages = {"c1": "c1_cpu", "c2": "c2_cuda", "c3": "c3_single_gpu", "c4": "c4_multi_gpu"}
    return {(r["run_id"], r["agent"], s): (r[f"{name}_success"], r[f"{name}_denom"])
            for r in summarize(trials) for s, name in stages.items() if r["job_count"]}


def main(argv: list[str]) -> int:
    """Run the benchmark; 1 when a step raised or the numbers disagree with DuckDB's."""
    try:
        return _main(argv)
    except Exception:
        traceback.print_exc()
        return 1


def _main(argv: list[str]) -> int:
    one_shard = "--one-shard" in argv
    keep = argv[argv.index("--dir") + 1] if "--dir" in argv else None
    numbers = [a for a in argv if not a.startswith("--") and a != keep]
    tasks, agents, trials = (int(x) for x in numbers[:3]) if len(numbers) >= 3 else (44, 6, 5)
    with contextlib.ExitStack() as stack:
        tmp = Path(keep) if keep else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        out = tmp / "run"
        n = tasks * agents * trials
        if (out / TRIALS_DIR).is_dir():
            print(f"synthetic run: reused {out} ({sum(1 for _ in out.rglob('*.parquet')):,} shards)")
        else:
            t = time.perf_counter()
            attempts = random_rows(tasks, agents, trials, log_chars=LOG_CHARS)
            if one_shard:
                ParquetSink(out).write([r for r, _ in attempts], [s for _, stages in attempts for s in stages])
            else:
                write(out, attempts)
            del attempts
            write_s = time.perf_counter() - t
            print(f"synthetic run: {tasks} tasks x {agents} agents x {trials} trials = {n:,} trials"
                  f" (written in {write_s:.1f} s, {sum(1 for _ in out.rglob('*.parquet')):,} shards)"
                  + (" [--one-shard]" if one_shard else " [one sink write per attempt]"))
        load_s, (trials_t, stages_t) = best(lambda: (read_trials(out), read_stages(out, columns=STAGE_COLUMNS)))
        current_s, current = best(lambda: load_trials(out))
        stats_s, stats = best(lambda: run_statistics(trials_t))
        cmp_s, cmps = best(lambda: all_comparisons(stats.run))
        analysis_s, _ = best(lambda: analyze(trials_t, stages_t))
        report_s, text = best(lambda: format_report(out))
        duck_s, duck = best(lambda: duckdb_rates(out))
        print(f"  load (trials {trials_t.num_rows:,} rows + stages {stages_t.num_rows:,} rows): {load_s:.3f}")
        print(f"  load_trials (current scored, {current.num_rows:,} rows): {current_s:.3f}")
        print(f"  statistics ({len(stats.stages)} agent-stage rates): {stats_s:.3f}")
        print(f"  all paired comparisons ({len(cmps)}): {cmp_s:.3f}")
        print(f"  analyze (statistics + cost + failures + C5): {analysis_s:.3f}")
        both = Seconds(load_s + stats_s)
        both.cpu = load_s.cpu + stats_s.cpu
        print(f"  load + statistics: {both:.3f}")
        print(f"  terminal report, reads included ({len(text.splitlines())} lines): {report_s:.3f}  [target <= 3 s]")
        print(f"  DuckDB reference (per-agent, per-stage success counts, {len(duck)} rates, same files): {duck_s:.3f}")
        print(f"ratio: terminal report / DuckDB reference = {report_s / duck_s:.1f}x")
        mine = report_rates(trials_t)
        if mine != duck:
            wrong = sorted(k for k in set(mine) | set(duck) if mine.get(k) != duck.get(k))
            print(f"error: the report's rates differ from DuckDB's on {len(wrong)} (sweep, agent, stage), first "
                  f"{wrong[0]}: report {mine.get(wrong[0])}, DuckDB {duck.get(wrong[0])}", file=sys.stderr)
            return 1
        print(f"  the report's {len(mine)} rates equal DuckDB's")
        if "--stats-only" in argv:
            return 0
        try:
            import matplotlib  # noqa: F401  (the plots extra)
        except ImportError:
            return 0
        from analysis.plots import write_plots

        analysis = analyze(trials_t, stages_t)
        plots_s, paths = best(lambda: write_plots(analysis, Path(tmp) / "plots"), 1)
        print(f"  plots ({len(paths)} PNGs): {plots_s:.3f}")
        from analysis.report_html import stage_columns, write_html

        html_load_s, detail = best(lambda: read_stages(out, columns=stage_columns()), 1)
        html_s, page = best(lambda: write_html(out, Path(tmp) / "report.html", trials=trials_t, stages=detail,
                                               analysis=analysis), 1)
        print(f"  load for html (stages with log heads and tails, {detail.num_rows:,} rows): {html_load_s:.3f}")
        print(f"  html (plots + drill-down of every trial + template, {page.stat().st_size / 2**20:.1f} MiB): {html_s:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
