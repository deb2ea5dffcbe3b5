"""The Harbor reward table in the HTML report (analysis.rewards_page through
analysis.report_html.write_html) on rows written with the real sink: beside a reb-ray sweep's
paper tables, alone, numbers as a person reads them, and an agent's markup shown as text."""

from __future__ import annotations

import csv
import io

import pytest

from analysis.report_html import write_html
from analysis.rewards import reward_summary, split_harbor
from analysis.rewards_csv import rewards_csv
from reb_ray.results.read import read_trials

from .harbor_runs import HOSTILE, HOSTILE_KEY, SWEEP, write_harbor_run, write_mixed_run
from .html_dom import parse


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """(run dir, html text) of the mixed run's report."""
    tmp = tmp_path_factory.mktemp("rewards-page")
    run = write_mixed_run(tmp / "run")
    return run, write_html(run, tmp / "report.html", with_plots=False).read_text(encoding="utf-8")


def test_the_harbor_sweep_is_its_reward_table_beside_the_paper_tables(mixed):
    _, text = mixed
    page = parse(text)
    assert set(page.tables[("s1", "summary")]) == {"alpha", "beta"}  # the reb-ray sweep as before
    assert (SWEEP, "summary") not in page.tables  # no C0..C5 columns for the Harbor one
    rewards = page.tables[(SWEEP, "rewards")]
    assert set(rewards) == {"oracle", "command", HOSTILE}
    oracle, command = rewards["oracle"], rewards["command"]
    assert (oracle["trials"], oracle["rewarded"], oracle["mean reward"], oracle["reward_passed"]) == ("3", "2", "0.750", "2.000")
    assert (oracle["agent time"], oracle["cost"], oracle["hardware"]) == ("40.0 s", "$0.00", "1")
    assert (command["agent time"], command["cost"], command["mean reward"]) == ("1 h 30 min", "$0.01 (1/3 priced)", "0.333")
    assert (command["failed: agent"], command["infra"], command["reward_passed"]) == ("1", "1", "-")
    assert 'href="#sweep-1">s1</a>' in text and 'href="#harbor-1">h1</a>' in text
    assert "matrix?sweep=h1" in text and "No trials in this run" not in text


def test_the_page_and_the_csv_show_the_same_numbers(mixed):
    run, text = mixed
    rows = {r["agent"]: r for r in csv.DictReader(io.StringIO(rewards_csv(reward_summary(split_harbor(read_trials(run))[0]))))}
    for agent, cells in parse(text).tables[(SWEEP, "rewards")].items():
        record = rows[agent]
        assert cells["mean reward"] == f"{float(record['mean_reward']):.3f}"
        assert cells["95% interval"] == f"[{float(record['mean_reward_ci_low']):.3f}, {float(record['mean_reward_ci_high']):.3f}]"
        assert cells["trials"] == record["trials"] and cells["infra"] == record["infra_errors"]


def test_an_agent_name_and_a_reward_key_of_markup_are_text(mixed):
    _, text = mixed
    assert "<img src=x" not in text and "<script" not in text
    assert "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" in text and "&lt;script&gt;alert(&#39;k&#39;)&lt;/script&gt;" in text
    page = parse(text)
    assert page.images == [] and page.scripts == 0
    hostile = page.tables[(SWEEP, "rewards")][HOSTILE]
    assert hostile["agent"] == HOSTILE and hostile[f"reward_{HOSTILE_KEY}"] == "7.000"


def test_a_run_of_harbor_sweeps_only_is_its_reward_tables(tmp_path):
    run = write_harbor_run(tmp_path / "run")
    text = write_html(run, tmp_path / "r.html", with_plots=False).read_text(encoding="utf-8")
    page = parse(text)
    assert [key for key in page.tables] == [(SWEEP, "rewards")]
    assert "No trials in this run" not in text and "<nav>" not in text  # one sweep: nothing to navigate
    assert page.tables[(SWEEP, "rewards")]["oracle"]["mean reward"] == "0.750"
