"""`reb-ray report` and `python -m analysis` on one run: the terminal tables and the CSV agree."""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.summary import HEADERS
from tests.analysis.runs import write_run
from tests.cli.in_process import run_cli

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess:
    """`python ARGS` from the repository root; the reb-ray command line (`-c ... main()`) runs in
    this process (tests.cli.in_process), `python -m analysis` as its own process."""
    if args[:2] == ("-c", "from reb_ray.cli import main; main()"):
        return run_cli(*args[2:], cwd=ROOT)
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT, timeout=300)


def _terminal_rows(text: str) -> dict[str, dict[str, str]]:
    lines = text.split("\n\n")[0].splitlines()
    assert re.split(r"\s{2,}", lines[1].strip()) == list(HEADERS)
    return {cells[0]: dict(zip(HEADERS, cells)) for cells in (re.split(r"\s{2,}", line.strip()) for line in lines[3:])}


def _expected_cells(row: dict[str, str]) -> dict[str, str]:
    """What the terminal must show for one CSV row (empty cell = unknown = "-")."""
    def dash(value: str) -> str:
        return value or "-"

    cells = {"agent": row["agent"], "trials": row["job_count"],
             "C0 missing/total": f"{dash(row['c0_missing_sum'])}/{dash(row['c0_total_sum'])}",
             "C0 unowned": dash(row["c0_unowned_sum"]),
             "C0 not run": row["c0_not_run"],
             "C5 lies": dash(row["c5_total_sum"]) + (f" rf{row['c5_report_faults_sum']}"
                                                     if row["c5_report_faults_sum"] not in ("", "0") else ""),
             "no assets": dash(row["stages_missing_assets_sum"]), "infra": row["infra_errors"],
             "tokens": dash(row["agent_tokens_total_sum"])}
    if row["cost_usd_sum"]:
        known = "" if row["cost_valid_jobs"] == row["job_count"] else f" ({row['cost_valid_jobs']}/{row['job_count']})"
        cells["cost $"] = f"{float(row['cost_usd_sum']):.4f}{known}"
    else:
        cells["cost $"] = "-"
    for header, name in (("C1", "c1_cpu"), ("C2", "c2_cuda"), ("C3", "c3_single_gpu"), ("C4", "c4_multi_gpu")):
        cell = "-" if row[f"{name}_denom"] == "0" else f"{row[f'{name}_success']}/{row[f'{name}_denom']}"
        cell += f" hw{row[f'{name}_hardware']}" if row[f"{name}_hardware"] != "0" else ""
        cell += f" nr{row[f'{name}_not_run']}" if row[f"{name}_not_run"] != "0" else ""
        cells[header] = cell
    return cells


def test_report_terminal_python_m_analysis_and_csv_agree(tmp_path):
    run_dir, csv_file = write_run(tmp_path / "run"), tmp_path / "summary.csv"
    report = _run("-c", "from reb_ray.cli import main; main()", "report", str(run_dir), "--csv", str(csv_file))
    analysis = _run("-m", "analysis", str(run_dir))
    assert (report.returncode, analysis.returncode) == (0, 0), report.stderr + analysis.stderr
    assert report.stdout == analysis.stdout + f"wrote {csv_file}\n"  # one table, printed twice

    terminal = _terminal_rows(analysis.stdout)
    rows = list(csv.DictReader(csv_file.open()))
    assert [r["agent"] for r in rows] == list(terminal) == ["alpha", "beta"]
    for row in rows:
        shown = terminal[row["agent"]]
        assert {k: v for k, v in shown.items() if k not in ("agent s", "env GiB")} == _expected_cells(row)
        for header, column in (("agent s", "agent_wall_time_avg_sec"), ("env GiB", "env_size_avg_gb")):
            if row[column]:
                assert float(shown[header]) == float(row[column])  # the same rounded number
            else:
                assert shown[header] == "-"
    # the hand-made run has known values in these cells: the comparison is not vacuous
    assert terminal["alpha"]["agent s"] == "75.06" and terminal["alpha"]["C4"] == "0/2 hw2"
    assert terminal["alpha"]["cost $"] == "0.7500 (2/3)" and terminal["alpha"]["tokens"] == "1320"


def test_report_csv_into_a_missing_directory_is_one_line(tmp_path):
    run_dir = write_run(tmp_path / "run")
    res = _run("-c", "from reb_ray.cli import main; main()", "report", str(run_dir), "--csv", str(tmp_path / "no" / "x.csv"))
    assert res.returncode == 2 and res.stderr.startswith("error: --csv ") and res.stderr.count("\n") == 1


def test_report_csv_dash_prints_the_csv(tmp_path):
    run_dir, csv_file = write_run(tmp_path / "run"), tmp_path / "summary.csv"
    assert _run("-c", "from reb_ray.cli import main; main()", "report", str(run_dir), "--csv", str(csv_file)).returncode == 0
    res = _run("-c", "from reb_ray.cli import main; main()", "report", str(run_dir), "--csv", "-")
    assert res.returncode == 0 and res.stdout == csv_file.read_text()


def test_report_analysis_agrees_with_the_csv(tmp_path):
    """Issue 14 item 8: the analysis under the table and the CSV show the same numbers where
    they share one (stage successes over applicable trials, C0 missing / total, tokens, cost),
    and the 20x-tokens finding is a line of the report."""
    from reb_ray.testing.synthetic import write_fixture

    run_dir, csv_file = write_fixture(tmp_path / "run"), tmp_path / "summary.csv"
    report = _run("-c", "from reb_ray.cli import main; main()", "report", str(run_dir), "--csv", str(csv_file))
    assert report.returncode == 0, report.stderr
    rows = {r["agent"]: r for r in csv.DictReader(csv_file.open())}
    blocks = report.stdout.split("\n\n")
    rates = next(b for b in blocks if b.startswith("Success per stage")).splitlines()
    costs = next(b for b in blocks if b.startswith("Cost and efficiency")).splitlines()
    header = re.split(r"\s{2,}", next(line for line in rates if line.strip().startswith("agent")).strip())
    assert header == ["agent", "C0 missing", "C1", "C2", "C3", "C4", "C5"]
    summary, seen = _terminal_rows(report.stdout), set()
    for line in rates:
        cells = re.split(r"\s{2,}", line.strip())
        if cells[0] not in rows:
            continue
        row, shown = rows[cells[0]], dict(zip(header, cells))
        seen.add(cells[0])
        assert shown["C0 missing"].split()[0] == f"{row['c0_missing_sum']}/{row['c0_total_sum']}"
        for label, name in (("C1", "c1_cpu"), ("C2", "c2_cuda"), ("C3", "c3_single_gpu"), ("C4", "c4_multi_gpu")):
            assert shown[label].split()[0] == f"{row[f'{name}_success']}/{row[f'{name}_denom']}", (cells[0], label)
            # the summary table above shows the same rate for the stage (hw/nr apart)
            assert summary[cells[0]][label].split()[0] == shown[label].split()[0], (cells[0], label)
    assert seen == {"frugal", "spender", "weak"}
    for line in costs:
        cells = re.split(r"\s{2,}", line.strip())
        if cells[0] not in rows:
            continue
        row = rows[cells[0]]
        if row["agent_tokens_total_sum"]:
            assert float(cells[1].replace(",", "")) == float(row["agent_tokens_total_sum"]) / int(row["job_count"])
            assert float(cells[2]) == pytest.approx(float(row["cost_usd_sum"]) / int(row["cost_valid_jobs"]), abs=5e-5)
        else:
            assert cells[1:3] == ["-", "-"] and row["cost_usd_sum"] == ""  # unknown on both sides, never 0
        # the unique-bytes size, labelled apart from the summary's every-path `env GiB`
        assert cells[4] == (f"{float(row['env_size_unique_avg_gb']):.3f}" if row["env_size_unique_avg_gb"] else "-")
    cost_header = re.split(r"\s{2,}", next(line for line in costs if line.strip().startswith("agent")).strip())
    assert cost_header[4] == "env GiB (unique)" and "env GiB" not in cost_header[:4] + cost_header[5:]
    assert any(line.startswith("FINDING: spender spent 20.0x frugal's tokens") for line in report.stdout.splitlines())


def _terminal_section(text: str, title: str) -> dict[str, list[str]]:
    block = next(b for b in text.split("\n\n") if b.startswith(title))
    lines = [line for line in block.splitlines() if line.startswith("  ") and not line.strip().startswith("---")]
    rows = [re.split(r"\s{2,}", line.strip()) for line in lines]
    return {r[0]: r for r in rows[1:]}


def test_report_html_terminal_and_csv_agree(tmp_path):
    """Issue 14 item 8: on the synthetic run, the HTML report (`--html`), the terminal report and
    the CSV (`--csv`) agree on every number they share: the summary table cell for cell, the
    analysis tables cell for cell, and per agent and stage the successes and denominators, C0
    missing / total, tokens and cost, down to the per-trial drill-down's badges, tokens and cost."""
    from tests.analysis.html_dom import parse
    from reb_ray.testing.synthetic import write_fixture

    run_dir, csv_file, html_file = write_fixture(tmp_path / "run"), tmp_path / "summary.csv", tmp_path / "report.html"
    res = _run("-c", "from reb_ray.cli import main; main()", "report", str(run_dir), "--csv", str(csv_file),
               "--html", str(html_file))
    assert res.returncode == 0, res.stderr
    assert res.stdout.endswith(f"wrote {csv_file}\nwrote {html_file}\n")
    page = parse(html_file.read_text(encoding="utf-8"))
    rows = {r["agent"]: r for r in csv.DictReader(csv_file.open())}
    assert set(rows) == {"frugal", "spender", "weak"}

    # the summary table: the terminal's cells, and the CSV's numbers (as test_report_terminal_... checks)
    terminal = _terminal_rows(res.stdout)
    summary = page.tables[("syn", "summary")]
    assert summary == terminal
    for agent, row in rows.items():
        assert {k: v for k, v in summary[agent].items() if k not in ("agent s", "env GiB")} == _expected_cells(row)
        assert float(summary[agent]["agent s"]) == float(row["agent_wall_time_avg_sec"])
    # the analysis tables: the terminal's cells
    for section, title in (("rates", "Success per stage"), ("pass_k", "pass@1"), ("costs", "Cost and efficiency"),
                           ("honesty", "C5 self-report audit")):
        shown = {agent: list(cells.values()) for agent, cells in page.tables[("syn", section)].items()}
        assert shown == _terminal_section(res.stdout, title), section
    # shared numbers with the CSV: successes / denominators, C0, tokens and cost
    rates, costs = page.tables[("syn", "rates")], page.tables[("syn", "costs")]
    for agent, row in rows.items():
        assert rates[agent]["C0 missing"].split()[0] == f"{row['c0_missing_sum']}/{row['c0_total_sum']}"
        for label, name in (("C1", "c1_cpu"), ("C2", "c2_cuda"), ("C3", "c3_single_gpu"), ("C4", "c4_multi_gpu")):
            assert rates[agent][label].split()[0] == f"{row[f'{name}_success']}/{row[f'{name}_denom']}", (agent, label)
        if row["agent_tokens_total_sum"]:
            assert float(costs[agent]["tokens/trial"].replace(",", "")) == float(row["agent_tokens_total_avg"])
            assert float(costs[agent]["$/trial"]) == pytest.approx(float(row["cost_usd_sum"]) / int(row["cost_valid_jobs"]), abs=5e-5)
        else:
            assert (costs[agent]["tokens/trial"], costs[agent]["$/trial"], row["cost_usd_sum"]) == ("-", "-", "")
    # the drill-down: its trials add up to the same counts, tokens and cost
    for agent, row in rows.items():
        mine = [t for t in page.trials if t["attrs"]["data-trial"].startswith(f"{agent}/")]
        scored = [t for t in mine if t["attrs"]["data-status"] == "scored"]
        assert len(scored) == int(row["job_count"]) == 12
        for label, name in (("C1", "c1_cpu"), ("C2", "c2_cuda"), ("C3", "c3_single_gpu"), ("C4", "c4_multi_gpu")):
            badges = [t["badges"][label] for t in scored]
            assert badges.count("success") == int(row[f"{name}_success"]), (agent, label)
            assert len(badges) - badges.count("skipped") == int(row[f"{name}_denom"]), (agent, label)
            assert badges.count("failure") == int(row[f"{name}_failed"]), (agent, label)
        tokens = [int(t["attrs"]["data-tokens"]) for t in scored if t["attrs"]["data-tokens"]]
        cost = [float(t["attrs"]["data-cost"]) for t in scored if t["attrs"]["data-cost"]]
        assert (str(sum(tokens)) if tokens else "") == row["agent_tokens_total_sum"]
        assert (sum(cost) if cost else None) == (pytest.approx(float(row["cost_usd_sum"])) if row["cost_usd_sum"] else None)
    # the finding: one line in both
    (finding,) = [line for line in res.stdout.splitlines() if line.startswith("FINDING")]
    assert finding in " ".join(page.text.split())
