"""The paper-compatible CSV (`reb-ray report --csv`): the release's `master_summary.csv`
columns in its order, then ours.

The numbers come from `analysis.scores.summarize` (their definitions, and where we differ from
the release on purpose, are in that module's docstring); this module only writes them: an
unknown value or a ratio over 0 is an empty cell, as in the release.
"""

from __future__ import annotations

import csv
import io

from .scores import COLUMNS


def to_csv(rows: list[dict]) -> str:
    """`analysis.scores.summarize` rows as CSV text: a header of COLUMNS, one line per
    (sweep, agent); None is written as an empty cell."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows({c: row.get(c) for c in COLUMNS} for row in rows)
    return buf.getvalue()
