"""The synthetic writers of the benchmarks and tests use only words the harness writes, checked
against the enums (reb_ray.testing.vocabulary): a made-up failure category makes the readers
refuse the run, and a benchmark over it would time an error page."""

from __future__ import annotations

import sys
from pathlib import Path

from reb_ray.testing.every_kind import every_kind_rows
from reb_ray.testing.synthetic import fixture_rows, random_rows
from reb_ray.testing.vocabulary import vocabulary_errors

ROOT = Path(__file__).resolve().parents[2]


def _benchmark_rows(n: int) -> tuple[list[dict], list[dict]]:
    sys.path.insert(0, str(ROOT))
    try:
        from benchmarks.results import stage_rows, trial_row
        from benchmarks.viewer import viewer_stage_rows
    finally:
        sys.path.remove(str(ROOT))
    return [trial_row(i) for i in range(n)], [s for i in range(n) for s in stage_rows(i) + viewer_stage_rows(i)]


def test_benchmark_rows_use_only_the_harness_words():
    trials, stages = _benchmark_rows(120)  # every residue the writers switch on (n % 3, 4, 5, 7, 11, 20)
    assert vocabulary_errors(trials, stages) == []


def test_synthetic_runs_use_only_the_harness_words():
    for attempts in (fixture_rows(), random_rows(5, 3, 2, seed=4), every_kind_rows()):
        assert vocabulary_errors([r for r, _ in attempts], [s for _, st in attempts for s in st]) == []


def test_a_made_up_word_is_named():
    errors = vocabulary_errors([{"trial_id": "a/t/0", "status": "scored", "c1_failure_category": "import_error",
                                 "failure_category": "cuda_unavailable"}],
                               [{"trial_id": "a/t/0", "stage": "c9", "status": "ok"}])
    assert errors == [
        "trials row 0 (a/t/0): failure_category = 'cuda_unavailable' is not one of " + errors[0].split("one of ")[1],
        errors[1], errors[2], errors[3]]
    assert "c1_failure_category = 'import_error'" in errors[1]
    assert "stage = 'c9'" in errors[2] and "status = 'ok'" in errors[3]
