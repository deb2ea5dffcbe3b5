"""`python -m analysis OUTPUT_DIR [--sweep-id ID]`: print the per-agent summary table."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from reb_ray.errors import RebRayError

from .summary import print_summary


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, print the summary; return 0, or 1 after printing a RebRayError line."""
    parser = argparse.ArgumentParser(prog="python -m analysis", description=__doc__)
    parser.add_argument("output_dir", type=Path, help="results directory holding trials/")
    parser.add_argument("--sweep-id", default=None, help="summarise only this sweep")
    args = parser.parse_args(argv)
    try:
        print_summary(args.output_dir, args.sweep_id)
    except RebRayError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
