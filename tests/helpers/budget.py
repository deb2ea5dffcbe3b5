"""Per-file time budgets of the test suite, checked by the run itself.

`tests/budgets.json` maps a test file (relative to `tests/`) to the seconds its tests may take in
a serial run: every phase of every test (setup, call, teardown) counts, so a module fixture's
cluster or sweep is charged to the file whose tests use it. A file that is not listed has
`DEFAULT_S`; the key `"total"` bounds the whole run. At the end of a run, a file over its budget
fails the run (exit status 1) with one line naming the file, the seconds it took and the budget,
which is raised in `tests/budgets.json` on purpose when a file's growth is wanted, never by
accident. The budgets leave room for a slow day of the 2-core CI machine (about 1.5x of a
measured ordinary day); a file is over only past its budget plus `GRACE_S`, because a small
file's time varies by a fixed few seconds (a Ray start, a slow Docker call) rather than in
proportion, and a 30 s file at 30.5 s is noise, not growth. The total has no grace: it is what
keeps the whole run inside CI's limit.

A side-by-side run (`-n`) shares the cores between workers, so each test takes longer than it
would alone: the run prints the files over budget but does not fail for them. `--no-budgets`
turns the check off (a run under a profiler, a debugger, a deliberately loaded machine).

A serial run also prints the files that kept the machine busiest: each test's busy core-seconds
of the whole machine (`/proc/stat`: every core's time not idle or waiting on I/O), setup and
teardown included, summed per file. Machine-wide on purpose: most of a heavy test's work runs
outside the pytest process tree (the Docker daemon, the containers, the Ray daemons), which
`/usr/bin/time` on pytest does not see; anything else running on the machine at the time
counts too, so the figures are a quiet machine's. Side by side the tests overlap and no file's
share can be told apart, so nothing is printed there.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
BUDGETS = TESTS / "budgets.json"
#: Seconds a file not named in `tests/budgets.json` may take.
DEFAULT_S = 20.0
#: Seconds a file may run past its budget before it counts as over (never applied to the total).
GRACE_S = 15.0
TOTAL = "total"

_seconds: Counter[str] = Counter()
_busy: Counter[str] = Counter()
#: How many files the busiest-files summary names.
BUSIEST = 15


def pytest_addoption(parser):
    parser.addoption("--no-budgets", action="store_true", default=False,
                     help="do not check the per-file time budgets of tests/budgets.json")


def _file_of(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    return path[len("tests/"):] if path.startswith("tests/") else path


def pytest_runtest_logreport(report):
    """Every phase of every test, on the controller too when workers run the tests."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    _seconds[_file_of(report.nodeid)] += report.duration
    _seconds[TOTAL] += report.duration


def busy_core_seconds(stat_text: str, ticks_per_s: int) -> float:
    """Busy core-seconds since boot from the text of `/proc/stat`: the first ("cpu") line's
    user, nice, system, irq, softirq and steal ticks (idle and iowait left out), in seconds.
    Raises ValueError for a text whose first line is not the all-cores line."""
    fields = stat_text.split("\n", 1)[0].split()
    if not fields or fields[0] != "cpu" or len(fields) < 9:
        raise ValueError(f"not /proc/stat's all-cores line: {stat_text[:60]!r}")
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[1:9])
    return (user + nice + system + irq + softirq + steal) / ticks_per_s


def _machine_busy_s() -> float | None:
    """The machine's busy core-seconds now; None where there is no /proc/stat."""
    try:
        return busy_core_seconds(Path("/proc/stat").read_text(), os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError):
        return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """The machine's busy core-seconds over one test's setup, call and teardown (a module
    fixture's finalizer runs in its last test's teardown), charged to the test's file."""
    before = None if os.environ.get("PYTEST_XDIST_WORKER") else _machine_busy_s()
    yield
    after = _machine_busy_s() if before is not None else None
    if after is not None:
        _busy[_file_of(item.nodeid)] += after - before
        _busy[TOTAL] += after - before


def load_budgets(path: Path | None = None) -> dict[str, float]:
    """The budgets file (`BUDGETS` unless `path`) as {file: seconds}; a clear one-line error for
    a malformed one."""
    path = path or BUDGETS
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise pytest.UsageError(f"{path}: not a JSON object of seconds per test file ({exc})") from exc
    if not isinstance(data, dict):
        raise pytest.UsageError(f"{path}: not a JSON object of seconds per test file")
    budgets = {str(k): v for k, v in data.items() if not str(k).startswith("_")}  # "_note": a comment
    for name, value in budgets.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise pytest.UsageError(f"{path}: {name!r}: {value!r} is not a positive number of seconds")
    return {name: float(value) for name, value in budgets.items()}


def over_budget(seconds: dict[str, float], budgets: dict[str, float]) -> list[tuple[str, float, float]]:
    """(file, seconds taken, budget) for every file past its budget plus `GRACE_S`, and the total
    past its own budget, slowest first."""
    over = [(name, took, budgets.get(name, DEFAULT_S)) for name, took in seconds.items()]
    return sorted(((n, t, b) for n, t, b in over if t > b + (0.0 if n == TOTAL else GRACE_S)),
                  key=lambda x: -x[1])


_over: list[tuple[str, float, float]] = []


def pytest_sessionfinish(session, exitstatus):
    """Fail a serial run that went over a budget (a failing run stays as it is)."""
    config = session.config
    if config.getoption("--no-budgets") or not _seconds or not BUDGETS.is_file():
        return
    _over[:] = over_budget(dict(_seconds), load_budgets())
    if _over and not _side_by_side(config) and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _side_by_side(config) -> bool:
    return bool(getattr(config.option, "numprocesses", None))


def pytest_terminal_summary(terminalreporter, config):
    side_by_side = _side_by_side(config)
    for name, took, budget in _over:
        terminalreporter.write_line(
            f"over budget: tests/{name} took {took:.1f} s, budget {budget:g} s "
            f"(raise it in tests/budgets.json on purpose, or make the file faster)",
            red=not side_by_side, yellow=side_by_side)
    if _over and side_by_side:
        terminalreporter.write_line("budgets are enforced in serial runs only; this run had workers")
    if _busy and not side_by_side:
        busiest = sorted(((n, s) for n, s in _busy.items() if n != TOTAL), key=lambda x: -x[1])[:BUSIEST]
        terminalreporter.write_sep("=", "the files that kept the machine busiest (core-seconds, setup and teardown included)")
        for name, seconds in busiest:
            terminalreporter.write_line(f"{seconds:8.1f} core-s  {_seconds.get(name, 0.0):7.1f} s  tests/{name}")
        terminalreporter.write_line(f"{_busy[TOTAL]:8.1f} core-s  {_seconds.get(TOTAL, 0.0):7.1f} s  all tests")
