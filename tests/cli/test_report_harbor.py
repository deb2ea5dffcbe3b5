"""`reb-ray report --csv/--html` on Harbor sweeps (rows written with the real sink): a run of
Harbor sweeps only writes the reward table where asked; beside a reb-ray sweep the paper's CSV
keeps its columns and rows and the reward table goes beside it as FILE-rewards."""

from __future__ import annotations

import csv
import io

from analysis.rewards_csv import REWARD_COLUMNS
from analysis.scores import COLUMNS
from tests.analysis.harbor_runs import SWEEP, write_harbor_run, write_mixed_run
from tests.analysis.html_dom import parse
from tests.cli.in_process import run_cli


def _csv(text: str) -> tuple[list[str], list[dict[str, str]]]:
    reader = csv.DictReader(io.StringIO(text))
    return reader.fieldnames, list(reader)


def test_a_harbor_only_run_writes_its_reward_table_as_the_csv_and_the_html(tmp_path):
    run = write_harbor_run(tmp_path / "run")
    out, page = tmp_path / "summary.csv", tmp_path / "report.html"
    done = run_cli("report", str(run), "--csv", str(out), "--html", str(page))
    assert done.returncode == 0, done.stderr
    assert "mean reward" in done.stdout and f"wrote {out}" in done.stdout and f"wrote {page}" in done.stdout
    header, rows = _csv(out.read_text())
    assert header[:len(REWARD_COLUMNS)] == REWARD_COLUMNS and {r["sweep_id"] for r in rows} == {SWEEP}
    assert not (tmp_path / "summary-rewards.csv").exists()
    assert parse(page.read_text(encoding="utf-8")).tables[(SWEEP, "rewards")]["oracle"]["cost"] == "$0.00"
    dash = run_cli("report", str(run), "--csv", "-")
    assert dash.returncode == 0 and dash.stdout == out.read_text()  # the CSV only, no table


def test_a_mixed_run_writes_the_paper_csv_and_the_reward_table_beside_it(tmp_path):
    run = write_mixed_run(tmp_path / "run")
    out = tmp_path / "summary.csv"
    done = run_cli("report", str(run), "--csv", str(out))
    assert done.returncode == 0, done.stderr
    header, paper = _csv(out.read_text())
    assert header == COLUMNS and {r["run_id"] for r in paper} == {"s1"}  # no Harbor row among the paper's
    header, rewards = _csv((tmp_path / "summary-rewards.csv").read_text())
    assert header[:len(REWARD_COLUMNS)] == REWARD_COLUMNS and {r["sweep_id"] for r in rewards} == {SWEEP}
    assert f"wrote {tmp_path / 'summary-rewards.csv'}" in done.stdout
    assert done.stdout.index("(Harbor tasks)") < done.stdout.index("C0 missing")  # both terminal tables
    dash = run_cli("report", str(run), "--csv", "-")
    assert dash.returncode == 0 and dash.stdout == out.read_text()  # stdout holds the paper's CSV alone
    assert "reward table is not in it" in dash.stderr


def test_an_unwritable_reward_table_is_one_line_and_leaves_no_paper_csv(tmp_path):
    run = write_mixed_run(tmp_path / "run")
    out = tmp_path / "summary.csv"
    (tmp_path / "summary-rewards.csv").mkdir()  # a directory where the file would go
    done = run_cli("report", str(run), "--csv", str(out))
    assert done.returncode == 2 and done.stderr.startswith("error: --csv ") and done.stderr.count("\n") == 1
    assert "summary-rewards.csv" in done.stderr and not out.exists()
