"""analysis.terminal: the report's analysis sections, on the synthetic run."""

from __future__ import annotations

import re

import pytest

from analysis.terminal import format_report

from reb_ray.testing.synthetic import fixture_rows, write, write_fixture


@pytest.fixture(scope="module")
def text(tmp_path_factory) -> str:
    return format_report(write_fixture(tmp_path_factory.mktemp("fixture") / "run"))


def _section(text: str, title: str) -> list[str]:
    block = next(b for b in text.split("\n\n") if title in b)
    return [line for line in block.splitlines() if line.startswith("  ") and not line.strip().startswith("---")]


def _cells(line: str) -> list[str]:
    return re.split(r"\s{2,}", line.strip())


def test_the_20x_tokens_finding_is_one_line(text):
    (line,) = [line for line in text.splitlines() if line.startswith("FINDING")]
    assert line.startswith("FINDING: spender spent 20.0x frugal's tokens per trial (100,000 vs 5,000)")
    assert "for no better success (C1 38% vs 38%" in line
    # it comes before the tables: the first thing after the heading
    assert text.index("analysis of sweep syn\n\nFINDING") > 0


def test_no_finding_without_the_spender(tmp_path):
    run = write(tmp_path / "run", [a for a in fixture_rows() if a[0]["agent"] != "spender"])
    assert "FINDING" not in format_report(run)


def test_rates_are_rounded_with_intervals(text):
    rows = {(_cells(line))[0]: _cells(line) for line in _section(text, "Success per stage")[1:]}
    assert rows["frugal"][1].startswith("27/420 6.4% [")  # C0 missing fraction
    assert rows["frugal"][2].startswith("3/8 38% [")  # C1
    assert rows["weak"][2] == "0/8 0% [0-49]"  # Wilson over 4 tasks: 0 to 3.84/7.84
    assert not re.search(r"\d\.\d{5,}", text)  # no raw floats anywhere


def test_unknown_cost_prints_dash_never_zero(text):
    rows = {_cells(line)[0]: _cells(line) for line in _section(text, "Cost and efficiency")[1:]}
    assert rows["weak"][1:3] == ["-", "-"] and rows["weak"][5:] == ["-"] * 6
    assert rows["frugal"][1:3] == ["5,000", "0.0200"] and rows["frugal"][5] == "0.0533"  # $0.16 / 3 C1 successes
    assert "unknown $/trial: weak" in text


def test_failures_and_honesty_sections(text):
    failures = "\n".join(_section(text, "Failures per stage"))
    assert "C3 runtime 9, infra_assets_missing 1 [infra]" in failures
    assert "never scored: infra_error infra_sandbox 1" in failures
    honesty = {_cells(line)[0]: _cells(line) for line in _section(text, "C5 self-report audit")[1:]}
    assert honesty["weak"][:5] == ["weak", "10", "2", "8", "2/0/0"]
    assert honesty["frugal"][5:] == ["torch_version 1, gpu_count 1", "cuda_available 1"]


def test_comparisons_say_when_tasks_are_too_few(text):
    lines = [line for line in text.splitlines() if line.startswith("  C1 frugal vs")]
    assert [line.split(":")[0].strip() for line in lines] == ["C1 frugal vs spender", "C1 frugal vs weak"]
    assert all("too few tasks to tell them apart" in line for line in lines)


def test_analyze_run_reads_the_run_once_for_everything(tmp_path):
    from analysis.analyze import analyze_run

    a = analyze_run(write_fixture(tmp_path / "run"))
    assert [(f.metric, f.agent) for f in a.findings] == [("tokens", "spender"), ("cost_usd", "spender")]
    assert {h.agent: h.checks for h in a.honesty}["weak"] == {"python_path": 2}  # from the C5 stage rows
    assert a.unscored == {("syn", "weak"): {("infra_error", "infra_sandbox"): 1}}
    assert a.stats.stage("syn", "frugal", "c1").successes == 3


def test_an_agent_that_never_scored_shows_its_attempts(tmp_path):
    from .runs import write_run

    text = format_report(write_run(tmp_path / "run"))  # runs.ROWS: beta has only infra errors
    assert "  beta: never scored: infra_error infra_clone 2" in text.splitlines()


def test_a_stage_no_task_applies_prints_dash_and_one_without_a_success_none_ok(tmp_path):
    from reb_ray.testing.synthetic import trial

    run = write(tmp_path / "run", [trial("cpu", f"t{n}", 0, "FF--", cost_usd=0.01, input_tokens=100, output_tokens=10)
                                   for n in (1, 2)])
    text = format_report(run)
    (cells,) = [_cells(line) for line in _section(text, "Cost and efficiency")[1:]]
    # $/C1 ok, $/C3 ok, $/C4 ok: C1 applies and nobody passed it; no task applies C3 or C4
    assert cells[5:8] == ["none ok", "-", "-"], cells
