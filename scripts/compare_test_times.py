"""Where a suite's time went between two full runs: two JUnit reports (`pytest --junitxml=FILE`),
an earlier and a later one, compared test by test.

    python scripts/compare_test_times.py EARLIER.xml LATER.xml [--top N]

A test is the same test in both reports when its name (function and parameters) and its file's
name match, or, where files moved between packages, its name alone matches exactly one test on
each side. It prints the seconds of the tests found in both runs (earlier, later, their ratio on
its own line), of the tests only the later run has (new subjects, with the files that add the
most), and of those only the earlier run has (removed or renamed). That split answers whether a
change made the same tests slower or the suite grew: the total alone cannot.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Case:
    """One test case of a report: its module's dotted path, its name, seconds, whether it passed."""

    module: str
    name: str
    seconds: float
    passed: bool

    @property
    def file(self) -> str:
        """The module's last part: the test file's name, which survives a move between packages."""
        return self.module.rsplit(".", 1)[-1]


def read_cases(report: Path) -> list[Case]:
    """Every test case of a JUnit report; a skipped one counts as passed with its seconds."""
    cases = []
    for case in ET.parse(report).iter("testcase"):
        failed = case.find("failure") is not None or case.find("error") is not None
        cases.append(Case(case.get("classname", ""), case.get("name", ""), float(case.get("time") or 0), not failed))
    return cases


@dataclass
class Comparison:
    """Tests matched across the two reports and those found on one side only."""

    both: list[tuple[Case, Case]]
    only_earlier: list[Case]
    only_later: list[Case]


def match(earlier: list[Case], later: list[Case]) -> Comparison:
    """Pair each later test with its earlier self: same file name and test name first, then the
    test name alone where it is unique on both sides (a file renamed or split)."""
    by_key: dict[tuple[str, str], list[Case]] = defaultdict(list)
    for case in earlier:
        by_key[(case.file, case.name)].append(case)
    both, unmatched = [], []
    for case in later:
        found = by_key.get((case.file, case.name))
        if found:
            both.append((found.pop(0), case))
        else:
            unmatched.append(case)
    left = [case for cases in by_key.values() for case in cases]
    names_left = Counter(case.name for case in left)
    names_unmatched = Counter(case.name for case in unmatched)
    by_name = {case.name: case for case in left if names_left[case.name] == 1}
    only_later, paired = [], set()
    for case in unmatched:
        if names_unmatched[case.name] == 1 and case.name in by_name:
            both.append((by_name[case.name], case))
            paired.add(case.name)
        else:
            only_later.append(case)
    return Comparison(both, [case for case in left if case.name not in paired], only_later)


def seconds(cases) -> float:
    """The cases' seconds summed."""
    return sum(case.seconds for case in cases)


def render(comparison: Comparison, top: int = 10) -> str:
    """The comparison as lines for a person; the ratio of the matched tests on its own line."""
    old = seconds(old for old, _ in comparison.both)
    new = seconds(new for _, new in comparison.both)
    failed = sum(1 for old, new in comparison.both if not (old.passed and new.passed))
    lines = [f"in both runs: {len(comparison.both)} tests, {old:.0f} s earlier, {new:.0f} s later"
             + (f" ({failed} failed in one of the runs)" if failed else ""),
             f"{new / old:.2f}" if old else "n/a",
             f"only in the later run: {len(comparison.only_later)} tests, {seconds(comparison.only_later):.0f} s",
             f"only in the earlier run: {len(comparison.only_earlier)} tests, {seconds(comparison.only_earlier):.0f} s"]
    per_file: Counter[str] = Counter()
    for case in comparison.only_later:
        per_file[case.module] += case.seconds
    lines += [f"  {s:7.0f} s  {module}" for module, s in per_file.most_common(top)]
    slower = sorted(comparison.both, key=lambda pair: pair[0].seconds - pair[1].seconds)[:top]
    lines.append("most slower in the later run:")
    lines += [f"  {old.seconds:7.1f} -> {new.seconds:7.1f} s  {new.module}::{new.name}" for old, new in slower
              if new.seconds > old.seconds]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("earlier", type=Path)
    parser.add_argument("later", type=Path)
    parser.add_argument("--top", type=int, default=10, help="files and tests listed (default 10)")
    args = parser.parse_args(argv)
    for path in (args.earlier, args.later):
        if not path.is_file():
            print(f"compare_test_times: {path}: no such JUnit report", file=sys.stderr)
            return 2
    print(render(match(read_cases(args.earlier), read_cases(args.later)), args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
