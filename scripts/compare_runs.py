#!/usr/bin/env python3
"""Compare two runs' trials and stages rows on every deterministic column.

    python scripts/compare_runs.py OUT_A OUT_B [--sweep-a ID] [--sweep-b ID] [--latest-only]
                                   [--ignore COLUMN ...] [--show-excluded]

OUT_A and OUT_B are two sweeps' `--output` directories (one sweep each, or name it with
--sweep-a / --sweep-b). Rows are matched by (trial_id, attempt) and, for stages, the stage; a
trial_id is "<agent>/<task_id>/<trial_index>". Every column is compared except those that time
something or name what a run makes up afresh (timings, timestamps, host facts, sweep ids,
container and image ids, ports, command output with times in it): --show-excluded lists them with
their reasons (reb_ray.results.compare.EXCLUDED). Each side's sweep id and output directory are
replaced by placeholders in string values before comparing.

Prints one line per difference and a summary; exit 0 when the runs agree, 1 on any difference,
2 on bad input (a directory that is not a run, an unknown column).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's reb_ray

from reb_ray.errors import RebRayError  # noqa: E402
from reb_ray.results.compare import EXCLUDED, compare_runs, compared_columns, count_rows  # noqa: E402

MAX_LINES = 200  # differences printed; the summary counts them all


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output_a", type=Path)
    parser.add_argument("output_b", type=Path)
    parser.add_argument("--sweep-a")
    parser.add_argument("--sweep-b")
    parser.add_argument("--latest-only", action="store_true", help="compare each trial's current attempt only")
    parser.add_argument("--ignore", action="append", default=[], help="one more column not to compare (repeatable)")
    parser.add_argument("--show-excluded", action="store_true", help="list the columns never compared, and why")
    args = parser.parse_args(argv)
    if args.show_excluded:
        for dataset, columns in EXCLUDED.items():
            for column, why in columns.items():
                print(f"{dataset}.{column}: {why}")
        return 0
    try:
        differences = compare_runs(args.output_a, args.output_b, args.sweep_a, args.sweep_b,
                                   latest_only=args.latest_only, ignore=tuple(args.ignore))
        rows_a, rows_b = count_rows(args.output_a, args.sweep_a), count_rows(args.output_b, args.sweep_b)
    except RebRayError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for difference in differences[:MAX_LINES]:
        print(difference.line())
    if len(differences) > MAX_LINES:
        print(f"... and {len(differences) - MAX_LINES} more")
    ignored = tuple(args.ignore)
    print(f"A: {rows_a[0]} trials rows, {rows_a[1]} stages rows; B: {rows_b[0]} trials rows, {rows_b[1]} stages rows; "
          f"compared {len(compared_columns('trials', ignored))} trials and {len(compared_columns('stages', ignored))} "
          f"stages columns: {len(differences)} difference(s)")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
