"""rows_to_table: row dicts to tables of the explicit schemas, with errors naming row and column."""

from __future__ import annotations

import pyarrow as pa
import pytest

from reb_ray.results.rows import rows_to_table, split_by_sweep
from reb_ray.results.schema import SCHEMA_VERSION, STAGES_SCHEMA, TRIALS_SCHEMA
from tests.results.runs import rich_stages, rich_trial, stage, trial


def test_conversion_matches_pyarrow_from_pylist_and_types_absent_columns():
    rows = [rich_trial(n) for n in range(12)]
    got = rows_to_table(rows, TRIALS_SCHEMA)
    expected = pa.Table.from_pylist([{**r, "schema_version": SCHEMA_VERSION} for r in rows], schema=TRIALS_SCHEMA)
    assert got.equals(expected, check_metadata=True)
    stages = [s for n in range(4) for s in rich_stages(n)]
    assert rows_to_table(stages, STAGES_SCHEMA).to_pylist() == \
        pa.Table.from_pylist([{**s, "schema_version": SCHEMA_VERSION} for s in stages], schema=STAGES_SCHEMA).to_pylist()
    # a column no row has is typed nulls (F12), never a null-typed column
    assert got["env_size_bytes"].type == pa.int64() and got["env_size_bytes"].null_count == 12
    assert rows_to_table([], TRIALS_SCHEMA).schema.equals(TRIALS_SCHEMA, check_metadata=True)


def test_errors_name_the_row_the_column_and_the_value():
    with pytest.raises(ValueError, match=r"row 1, column 'c0_missing' \(int64\): 'many'"):
        rows_to_table([trial(1, c0_missing=3), trial(2, c0_missing="many")], TRIALS_SCHEMA)
    with pytest.raises(ValueError, match=r"row 0: unknown key 'bogus' for the stages schema \(also 'more'\)"):
        rows_to_table([stage(1, bogus=1, more=2)], STAGES_SCHEMA)
    with pytest.raises(ValueError, match="schema_version 2 differs"):
        rows_to_table([trial(1, schema_version=2)], TRIALS_SCHEMA)


def test_split_by_sweep_keeps_first_seen_order_and_names_bad_rows():
    rows = [trial(1, sweep="b"), trial(2, sweep="a"), trial(3, sweep="b")]
    parts = split_by_sweep(rows_to_table(rows, TRIALS_SCHEMA), rows, "trials")
    assert [(s, t["trial_id"].to_pylist()) for s, t in parts] == [("b", ["agentA/task1/0", "agentA/task3/0"]),
                                                                   ("a", ["agentA/task2/0"])]
    for bad, message in (({"sweep_id": ""}, "trials row 1: sweep_id must be a non-empty string, got ''"),
                         ({"sweep_id": None}, "trials row 1: sweep_id must be a non-empty string, got None"),
                         ({"trial_id": None}, "trials row 1: trial_id is required")):
        rows = [trial(1), trial(2, **bad)]
        with pytest.raises(ValueError, match=message):
            split_by_sweep(rows_to_table(rows, TRIALS_SCHEMA), rows, "trials")
