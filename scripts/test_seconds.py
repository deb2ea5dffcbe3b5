"""Write tests/file_seconds.json from a JUnit report of a full run (`pytest --junitxml=FILE`):
seconds per test file, rounded, which `tests/conftest.py` uses to start the longest groups of
a side-by-side run first.

    python scripts/test_seconds.py FILE.xml
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from compare_test_times import read_cases  # this directory is on the path of a script run from it

ROOT = Path(__file__).resolve().parents[1]


def file_seconds(report: Path) -> dict[str, int]:
    """{path relative to tests/: whole seconds} over every test case of `report`."""
    seconds: Counter[str] = Counter()
    for case in read_cases(report):
        parts = case.module.split(".")
        if parts[0] != "tests":
            continue
        # classname is the module's dotted path, then a class name when there is one
        for end in range(len(parts), 1, -1):
            path = "/".join(parts[1:end]) + ".py"
            if (ROOT / "tests" / path).is_file():
                seconds[path] += case.seconds
                break
    return {path: round(s) for path, s in sorted(seconds.items())}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = ROOT / "tests" / "file_seconds.json"
    out.write_text(json.dumps(file_seconds(Path(sys.argv[1])), indent=0, sort_keys=True) + "\n")
    print(f"{out}: {len(json.loads(out.read_text()))} files")
