"""The rebuild verifications of an output directory: one JSON record per line, appended.

`reb-ray env verify` and `sweep --verify-exports` append a record per rebuilt export (its source
attempt's `sweep_id`, `trial_id`, `attempt`, the verdict, the rebuild's seconds, the export's
directory); `tasks reference`, the sweep's "verified before" check and the trial view read them.
A line that is not a JSON object (an append cut short by a kill) is skipped, never fatal: the
records before and after it stay readable. Appending keeps every verification, so a recipe
verified again keeps its history; readers that want one take the last for an attempt.
"""

from __future__ import annotations

import json
from pathlib import Path

from reb_ray.jsonl import json_objects

#: The dataset's path under an output directory.
VERIFICATIONS = "environments/verifications.jsonl"


def read_verifications(output: Path) -> list[dict] | None:
    """Every record, oldest first; None when the output has no verifications dataset."""
    try:
        return json_objects((Path(output) / VERIFICATIONS).read_bytes())
    except FileNotFoundError:
        return None


def append_verification(output: Path, record: dict) -> None:
    """Append `record` as one line (values JSON cannot hold written as strings)."""
    dataset = Path(output) / VERIFICATIONS
    dataset.parent.mkdir(parents=True, exist_ok=True)
    with open(dataset, "a") as f:
        f.write(json.dumps(record, default=str) + "\n")


def attempt_key(record: dict) -> tuple:
    """(sweep_id, trial_id, attempt) of a record, the attempt as an int where it is one."""
    attempt = record.get("attempt")
    try:
        attempt = int(attempt)
    except (TypeError, ValueError):
        pass
    return record.get("sweep_id"), record.get("trial_id"), attempt
