"""Whether rows a synthetic writer builds use only the words the harness writes.

A benchmark or test that writes trials and stages rows by hand must use the vocabulary the
graders use (reb_ray.grading.vocabulary: stages, statuses, owners, failure categories;
reb_ray.results.schema: report statuses; reb_ray.grading.startup: python path kinds;
reb_ray.grading.witness: witness statuses; reb_ray.llm.prices: cost sources): a word
the harness never writes (say a failure category `import_error`) makes every reader that
checks its input refuse the run, and a benchmark over such rows measures an error page.

`vocabulary_errors(trials, stages)` lists every offending value, one line each naming the row,
the column and the value; empty when every value is a word the harness writes (or null).
"""

from __future__ import annotations

from collections.abc import Iterable

from reb_ray.grading.startup import PYTHON_PATH_KINDS
from reb_ray.grading.vocabulary import Category, Owner, Stage, Status, TrialStatus
from reb_ray.grading.witness import MISSING, UNVERIFIED, VALID
from reb_ray.llm.prices import COST_SOURCES
from reb_ray.results.schema import REPORT_STATUSES

#: The words a witness column holds (reb_ray.grading.witness).
WITNESS_STATUSES = (VALID, UNVERIFIED, MISSING)

_CATEGORIES = tuple(c.value for c in Category)
_STAGE_STATUSES = tuple(s.value for s in Status)
TRIAL_VOCABULARY: dict[str, tuple[str, ...]] = {
    "status": tuple(s.value for s in TrialStatus),
    "failure_owner": tuple(o.value for o in Owner),
    "failure_category": _CATEGORIES,
    "report_status": REPORT_STATUSES,
    "python_path_kind": PYTHON_PATH_KINDS,
    "cost_source": COST_SOURCES,
    **{f"c{n}_status": _STAGE_STATUSES for n in range(6)},
    "env_size_status": _STAGE_STATUSES,
    **{f"c{n}_failure_category": _CATEGORIES for n in range(6)},
    **{f"c{n}_witness": WITNESS_STATUSES for n in (1, 3, 4)},
}
STAGE_VOCABULARY: dict[str, tuple[str, ...]] = {
    "stage": tuple(s.value for s in Stage),
    "status": _STAGE_STATUSES,
    "failure_category": _CATEGORIES,
    "witness_status": WITNESS_STATUSES,
}


def _errors(rows: Iterable[dict], vocabulary: dict[str, tuple[str, ...]], what: str) -> list[str]:
    out = []
    for i, row in enumerate(rows):
        for column, words in vocabulary.items():
            value = row.get(column)
            if value is not None and value not in words:
                out.append(f"{what} row {i} ({row.get('trial_id')}): {column} = {value!r} is not one of "
                           f"{', '.join(words)}")
    return out


def vocabulary_errors(trials: Iterable[dict], stages: Iterable[dict] = ()) -> list[str]:
    """Every value of a vocabulary column of `trials` / `stages` rows (dicts) that the harness
    never writes, as "trials row 3 (agent1/task0/0): c1_failure_category = 'import_error' is
    not one of ..."; [] when there is none."""
    return _errors(trials, TRIAL_VOCABULARY, "trials") + _errors(stages, STAGE_VOCABULARY, "stages")
