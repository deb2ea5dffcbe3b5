"""rows_to_table: row dicts to tables of the explicit schemas, with errors naming row and column."""

from __future__ import annotations

import os
import subprocess
import sys

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
        rows_to_table([{**stage(1), "bogus": 1, "more": 2}], STAGES_SCHEMA)  # the factory refuses them itself
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


def test_timestamps_keep_their_instant_whatever_their_zone():
    """Aware timestamps convert as naive UTC microseconds and are relabelled UTC after
    (issue 12): a +05:00 value, a naive one (taken as UTC, as pyarrow does) and None agree with
    pyarrow's own conversion of the same rows."""
    import datetime as dt

    plus5 = dt.timezone(dt.timedelta(hours=5))
    values = [dt.datetime(2026, 1, 1, 12, tzinfo=plus5), dt.datetime(2026, 1, 1, 12), None,
              dt.datetime(2026, 1, 1, 7, tzinfo=dt.timezone.utc)]
    rows = [trial(n, started_at=v) for n, v in enumerate(values)]
    got = rows_to_table(rows, TRIALS_SCHEMA)
    expected = pa.Table.from_pylist([{**r, "schema_version": SCHEMA_VERSION} for r in rows], schema=TRIALS_SCHEMA)
    assert got.equals(expected) and got.schema.field("started_at").type == pa.timestamp("us", tz="UTC")
    assert got["started_at"][0].as_py() == got["started_at"][3].as_py()  # 12:00+05:00 is 07:00 UTC


def test_small_batches_share_their_null_columns_but_not_their_values():
    one, two = rows_to_table([trial(1, c0_missing=3)], TRIALS_SCHEMA), rows_to_table([trial(2)], TRIALS_SCHEMA)
    assert one["trial_id"].to_pylist() == ["agentA/task1/0"] and two["trial_id"].to_pylist() == ["agentA/task2/0"]
    assert one["c0_missing"].to_pylist() == [3] and two["c0_missing"].to_pylist() == [None]
    assert one["c4_exit_code"].type == pa.int64() and one["c4_exit_code"].null_count == 1


def _backend_in_a_fresh_process(env: dict[str, str]) -> str:
    code = "from reb_ray.results.rows import conversion_pool; print(conversion_pool().backend_name)"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout.strip()


def test_conversion_pool_is_jemalloc_unless_one_is_chosen():
    base = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    try:
        pa.jemalloc_memory_pool()
        expected = "jemalloc"
    except NotImplementedError:  # a pyarrow built without it: the default pool
        expected = pa.default_memory_pool().backend_name
    assert _backend_in_a_fresh_process(base) == expected
    assert _backend_in_a_fresh_process({**base, "ARROW_DEFAULT_MEMORY_POOL": "system"}) == "system"
