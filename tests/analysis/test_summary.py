"""The terminal summary of the hand-made run (tests/analysis/runs.py); cells derived by hand."""

from __future__ import annotations

import re

from analysis.__main__ import main
from analysis.scores import summarize
from analysis.summary import HEADERS, LEGEND, format_summary, print_summary
from reb_ray.results.parquet_sink import rows_to_table
from reb_ray.results.schema import TRIALS_SCHEMA

from .runs import ROWS, row, write_run


def table_rows(text: str) -> dict[str, dict[str, str]]:
    """{agent: {header: cell}} of a format_summary block (cells are separated by 2+ spaces)."""
    lines = text.split("\n\n")[0].splitlines()
    assert re.split(r"\s{2,}", lines[1].strip()) == list(HEADERS)
    return {cells[0]: dict(zip(HEADERS, cells)) for cells in (re.split(r"\s{2,}", line.strip()) for line in lines[3:])}


def test_cells_by_hand():
    text = format_summary(summarize(rows_to_table(ROWS, TRIALS_SCHEMA)))
    assert text.splitlines()[0] == "sweep s1" and text.endswith(LEGEND)
    cells = table_rows(text)
    assert cells["alpha"] == {
        "agent": "alpha", "trials": "3",
        "C0 missing/total": "22/60", "C0 unowned": "1", "C0 not run": "1",
        "C1": "2/3", "C2": "2/2",
        "C3": "0/2 nr1",  # over applicable (the paper's rate): t1 the agent's failure, t2 not run for a missing asset
        "C4": "0/2 hw2",  # both applicable C4 stages lacked GPUs: no success, none the agent's failure
        "C5 lies": "3 rf2",  # the paper's sums, then t1's two report contract faults
        "no assets": "1",
        "agent s": "75.06", "env GiB": "2.198",  # the release's measure, rounded, never raw floats
        "tokens": "1320",  # input + output of the trials that know both
        "cost $": "0.7500 (2/3)",  # t2's model has no price: 2 of 3 trials know their cost
        "infra": "2",
    }
    assert cells["beta"] == dict(zip(HEADERS, ["beta", "0", "-/-", "-", "0", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-",
                                               "2"]))
    assert format_summary([]) == "no trials"


def test_a_c0_that_did_not_run_is_unknown_not_zero():
    """Issue 9 item 3: `python -m analysis` and `reb-ray report` agree on `-/1`."""
    text = format_summary(summarize(rows_to_table(
        [row("a", "t1", 1, "scored", c0_status="not_run", c0_total=1, c1_status="skipped")], TRIALS_SCHEMA)))
    assert table_rows(text)["a"]["C0 missing/total"] == "-/1"


def test_print_summary_and_main_read_parquet(tmp_path, capsys):
    write_run(tmp_path)
    extra = [row("alpha", "t1", 1, "scored", sweep="s0", c0_status="success", c0_missing=1, c0_total=10)]
    write_run(tmp_path, extra)
    text = print_summary(tmp_path)
    assert capsys.readouterr().out.strip() == text
    assert text == format_summary(summarize(rows_to_table(ROWS + extra, TRIALS_SCHEMA)))
    assert [line for line in text.splitlines() if line.startswith("sweep ")] == ["sweep s0", "sweep s1"]

    only_s0 = print_summary(tmp_path, "s0")
    assert table_rows(only_s0)["alpha"]["C0 missing/total"] == "1/10"
    capsys.readouterr()
    assert main([str(tmp_path), "--sweep-id", "s0"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(only_s0 + "\n\nanalysis of sweep s0\n")  # the table, then the analysis
    assert "analysis of sweep s1" not in out


def test_the_legend_defines_each_column_a_reader_cannot_guess():
    """Every header but the self-explaining ones is defined in LEGEND as `<header>:` (C1..C4 together)."""
    plain = {"agent", "trials", "C0 missing/total", "C0 not run", "C1", "C2", "C3", "C4"}
    undefined = [h for h in HEADERS if h not in plain and f"{h}:" not in LEGEND]
    assert undefined == [] and "C1-C4:" in LEGEND
    assert "C0 counts them as resolved, as the paper does" in LEGEND  # unowned imports are in C0's resolved count
