"""`python -m analysis OUTPUT_DIR [--sweep-id ID] [--stages]`: print what `reb-ray report`
prints (the per-agent summary table, then the analysis: `analysis.terminal.format_report`), and
with --stages the outcome distribution of every stage per agent."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from reb_ray.errors import RebRayError

from .terminal import format_report


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, print the report; return 0, or 1 after printing a RebRayError line."""
    parser = argparse.ArgumentParser(prog="python -m analysis", description=__doc__)
    parser.add_argument("output_dir", type=Path, help="results directory holding trials/")
    parser.add_argument("--sweep-id", default=None, help="summarise only this sweep")
    parser.add_argument("--tasks-root", type=Path, default=None,
                        help="directory holding the suites the run's tasks come from (default: the bundled tasks/)")
    parser.add_argument("--stages", action="store_true", help="also print per-stage outcome counts per agent (hardware apart)")
    args = parser.parse_args(argv)
    if not (args.output_dir / "trials").is_dir():
        print(f"error: {args.output_dir}: no trials/ dataset here (is it a sweep's --output directory?)", file=sys.stderr)
        return 1
    try:
        print(format_report(args.output_dir, args.sweep_id, args.tasks_root))
        if args.stages:
            from reb_ray.results.read import read_trials

            from .stages import format_distribution

            print()
            print(format_distribution(read_trials(args.output_dir, args.sweep_id)))
    except RebRayError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
