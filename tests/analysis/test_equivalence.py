"""The analysis's numbers do not change when its implementation does.

`snapshot` computes everything a reader sees from a run (the terminal report, the paper CSV, the
stage distribution, the viewer's paper table) and every number behind it (the `Analysis`
dataclasses, floats as Python writes them: every digit) on the every-kind run
(reb_ray.testing.every_kind: scored, infra, hardware, missing report, unowned imports, report
faults, reused and re-run rows, several attempts, mixed hardware). The reference was frozen from
the row-at-a-time implementation before the columnar one replaced it; the test compares the
current code against it: what a reader sees character for character, and every number behind it
digit for digit, except the Wilson bounds, which scipy.stats computes in another order of
operations than the old formula did (they may differ in the last binary digit, 1e-16: no printed
digit moves; those are compared to 1e-12). To freeze again (only when a number is meant to change):
`python -m tests.analysis.test_equivalence`.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from reb_ray.testing.every_kind import write_every_kind

REFERENCE = Path(__file__).parent / "data" / "every_kind_reference.json"


def _plain(value):
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value) if f.name != "run"}
    if isinstance(value, dict):
        return [[_plain(k), _plain(v)] for k, v in value.items()]
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float):
        return repr(value)  # every digit
    return value


def snapshot(out: Path) -> dict:
    """What a reader sees of the run at `out`, and every number behind it."""
    from analysis.analyze import STAGE_COLUMNS, analyze
    from analysis.paper import to_csv
    from analysis.scores import summarize
    from analysis.stages import format_distribution
    from analysis.terminal import format_report
    from reb_ray.results.read import read_stages, read_trials
    from reb_ray.viewer.summary import compute

    trials = read_trials(out)
    analysis = analyze(trials, read_stages(out, columns=STAGE_COLUMNS))
    viewer = compute(out)
    for volatile in ("seconds", "peak_mb", "snapshot"):  # when, how much, which files: not numbers
        viewer.pop(volatile)
    return {
        "report": format_report(out).splitlines(),
        "csv": to_csv(summarize(trials)).splitlines(),
        "distribution": format_distribution(trials).splitlines(),
        "viewer": viewer,
        "summarize": _plain(summarize(trials)),
        "analysis": {name: _plain(getattr(analysis, name)) for name in
                     ("stats", "costs", "frontiers", "findings", "failures", "honesty", "unscored")},
    }


@pytest.fixture(scope="module")
def now(tmp_path_factory) -> dict:
    out = write_every_kind(tmp_path_factory.mktemp("every-kind") / "run")
    return json.loads(json.dumps(snapshot(out)))  # tuples as lists, as the reference holds them


@pytest.mark.parametrize("part", ["report", "csv", "distribution", "viewer", "summarize", "analysis"])
def test_same_numbers_as_the_frozen_reference(now, part):
    reference = json.loads(REFERENCE.read_text())[part]
    if part != "analysis":
        assert now[part] == reference
        return
    differences = list(_differences(now[part], reference, part))
    assert all(path.endswith((".low", ".high")) and abs(a - b) < 1e-12 for path, a, b in differences), differences[:5]
    assert len(differences) < 20  # a few Wilson bounds, not a systematic change


def _differences(a, b, path: str):
    """(path, a, b) of every leaf where a and b differ; float leaves (written as repr strings) as floats."""
    if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
        for key in a:
            yield from _differences(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            yield from _differences(x, y, f"{path}[{i}]")
    elif a != b:
        try:
            yield path, float(a), float(b)
        except (TypeError, ValueError):
            yield path, a, b


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        REFERENCE.parent.mkdir(exist_ok=True)
        REFERENCE.write_text(json.dumps(snapshot(write_every_kind(Path(tmp) / "run")), indent=0) + "\n")
        print(f"wrote {REFERENCE}")
