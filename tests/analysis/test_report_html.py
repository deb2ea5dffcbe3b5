"""analysis.report_html: one self-contained, inert HTML file holding the report's tables, its
plots and a drill-down per trial, on the synthetic run with an agent's markup in its words (the
browser's view of the same page: test_report_html_browser.py)."""

from __future__ import annotations

import base64
import re
from pathlib import Path
from urllib.parse import unquote

import pytest

from analysis.analyze import analyze_run
from analysis.plots import write_plots
from analysis.report_html import CSP, VIEWER_URL, write_html

from .html_dom import parse
from reb_ray.testing.synthetic import HOSTILE_TRIAL, PAYLOAD, fixture_rows, with_agent_words, write


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> tuple[Path, Path, str]:
    """(run dir, html path, html text) of the fixture with PAYLOAD in one trial's words."""
    tmp = tmp_path_factory.mktemp("html")
    run = tmp / "run"
    run.mkdir()
    write(run, with_agent_words(fixture_rows(), run))
    (tmp / "out").mkdir()
    html = write_html(run, tmp / "out" / "report.html")
    return run, html, html.read_text(encoding="utf-8")


def test_the_page_is_self_contained_and_inert(report):
    _, _, text = report
    page = parse(text)
    assert page.scripts == 0  # the report runs no script at all
    (csp,) = [m["content"] for m in page.metas if m.get("http-equiv") == "Content-Security-Policy"]
    assert csp == CSP and "default-src 'none'" in csp and "img-src data:" in csp
    assert len(page.images) == 4 and all(src.startswith("data:image/png;base64,") for src in page.images)
    # nothing outside the run, but the local viewer `reb-ray view` serves on this machine
    local = [h for h in page.hrefs if h.startswith(VIEWER_URL + "/")]
    assert page.hrefs and all(h.startswith(("./", "../", "#")) for h in page.hrefs if h not in local)
    assert not re.search(r"""(src|href)\s*=\s*["']?(?!http://127\.0\.0\.1:8765/)(https?:|//)""", text, re.I)
    assert "@import" not in text and "url(" not in text  # no stylesheet or font fetched


def test_agent_markup_is_text_everywhere_it_is_shown(report):
    _, _, text = report
    assert "<script" not in text and "<img src=\"x\"" not in text
    escaped = PAYLOAD.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&#34;").replace("'", "&#39;")
    # failure reason, C1 reason, log head, log tail, output tail, report.json (JSON-escaped quotes aside)
    assert text.count(escaped) >= 5
    page = parse(text)
    assert any(PAYLOAD in t for t in page.pres["log-tail"]) and any(PAYLOAD in t for t in page.pres["log-head"])
    assert any("\\x1b[2J" in t for t in page.pres["output-tail"])  # a terminal escape is shown, never passed on
    assert "\x1b" not in text
    (raw,) = page.pres["report-raw"]
    assert '"python_path": "<script>' in raw  # report.json pretty-printed, as text


def test_the_plots_are_the_analysis_pngs(report, tmp_path):
    run, _, text = report
    written = write_plots(analyze_run(run), tmp_path)
    embedded = [base64.b64decode(src.split(",", 1)[1]) for src in parse(text).images]
    assert embedded == [p.read_bytes() for p in written]  # same bytes, same order: pyramid, cost, failures, heatmap


def test_every_trial_has_a_drill_down(report):
    run, html, text = report
    page = parse(text)
    trials = {t["attrs"]["data-trial"]: t for t in page.trials}
    assert len(trials) == 36  # 3 agents x 6 tasks x 2 trials: current attempts only
    weak = trials["weak/t1/0"]  # an infra_error attempt, then scored: the scored one is shown
    assert weak["attrs"]["data-status"] == "scored" and "attempt 2 of 2 written" in text
    # frugal t3/0 is "FSFF": C1 failure, C2 success, C3 and C4 failures, C0 success, C5 audited clean
    hostile = trials[HOSTILE_TRIAL]
    assert hostile["badges"] == {"C0": "success", "C1": "failure", "C2": "success", "C3": "failure",
                                 "C4": "failure", "C5": "success"}
    assert hostile["attrs"]["data-tokens"] == "5000" and float(hostile["attrs"]["data-cost"]) == 0.02
    assert trials["frugal/t5/0"]["badges"]["C1"] == "skipped"  # C1 does not apply to t5
    assert trials["weak/t4/0"]["badges"]["C3"] == "not_run" and trials["weak/t2/0"]["badges"]["C4"] == "hardware"


def test_links_are_relative_to_the_html_file_and_reach_the_artifact(report):
    run, html, text = report
    (href,) = [h for h in parse(text).hrefs if h.endswith("agent.log.gz")]
    assert href.startswith("../run/artifacts/")
    assert (html.parent / unquote(href)).resolve() == (run / "artifacts/sweep_id=syn/frugal%2Ft3%2F0/1/agent.log.gz").resolve()
    assert "(not found)" not in text  # the one artifact named is stored


def test_a_path_never_reads_as_a_url_scheme(tmp_path):
    from analysis.drilldown import link

    found = link(tmp_path, "javascript:alert(1)", tmp_path)
    assert found["href"] == "./javascript%3Aalert%281%29" and found["exists"] is False


def test_an_unwritable_file_is_one_line(report, tmp_path):
    from reb_ray.errors import RebRayError

    run, _, _ = report
    with pytest.raises(RebRayError, match=r"^--html .*missing/r\.html: cannot write: No such file or directory$"):
        write_html(run, tmp_path / "missing" / "r.html", with_plots=False)


def test_the_report_names_the_viewer_and_leaves_out_stages_no_task_applies(report, tmp_path):
    import shlex

    from reb_ray.testing.synthetic import trial

    run, _, text = report
    page = parse(text)
    assert f"<code>reb-ray view {shlex.quote(str(run))}</code>" in text
    assert f"{VIEWER_URL}/" in page.hrefs and f"{VIEWER_URL}/matrix?sweep=syn" in page.hrefs
    # The fixture's tasks apply C1..C4: every stage is a column.
    assert {"C1", "C2", "C3", "C4"} <= set(page.tables[("syn", "summary")]["frugal"])
    # A CPU-only sweep (its tasks apply C1 only): C2..C4 leave the tables and the trial badges.
    cpu = tmp_path / "cpu"
    cpu.mkdir()
    rows = [trial(agent, task, 0, "S---" if task == "t1" else "F---", sweep="cpu") for agent in ("a", "b") for task in ("t1", "t2")]
    write(cpu, rows)
    html = write_html(cpu, tmp_path / "cpu.html", with_plots=False).read_text(encoding="utf-8")
    summary = parse(html).tables[("cpu", "summary")]["a"]
    assert "C1" in summary and not {"C2", "C3", "C4"} & set(summary)
    assert "No task of this sweep applies C2, C3, C4: left out of its tables." in html
    assert ">C1</span>" in html and ">C2</span>" not in html and ">C4</span>" not in html
