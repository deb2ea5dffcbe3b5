"""The HTML report in a real headless Chromium (issue 14, item 6): the page renders (a
screenshot with the plots' and the finding's colours), its tables hold the numbers the terminal
report prints, its images decode, and an agent's `<script>` is shown as text, never run."""

from __future__ import annotations

import html as html_lib
import json
import re
from pathlib import Path

import pytest
from PIL import Image

from analysis.report_html import CSP, write_html
from analysis.terminal import format_report

from .browser import dump_dom, screenshot
from .html_dom import parse
from reb_ray.testing.synthetic import HOSTILE_TRIAL, PAYLOAD, fixture_rows, with_agent_words, write

#: Reads back, once the page has loaded, what only a browser knows: each image's decoded size,
#: the scripts present and whether the agent's markup ran (it marks <html> data-pwned).
PROBE = """<script>
window.addEventListener("load", function () {
  var out = {images: Array.prototype.map.call(document.images, function (i) { return [i.naturalWidth, i.naturalHeight]; }),
             scripts: document.scripts.length, pwned: document.documentElement.getAttribute("data-pwned")};
  var pre = document.createElement("pre"); pre.id = "probe"; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""
TAB_BLUE = (31, 119, 180)  # matplotlib's first colour: the pyramid's first agent's bars
FINDING_BG = (0xff, 0xf4, 0xd6)  # the FINDING line's background


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("browser")
    out = tmp / "run"
    out.mkdir()
    write(out, with_agent_words(fixture_rows(), out))
    return out, write_html(out, tmp / "report.html")


def _terminal_table(text: str, title: str) -> dict[str, list[str]]:
    block = next(b for b in text.split("\n\n") if title in b)
    lines = [line for line in block.splitlines() if line.startswith("  ") and not line.strip().startswith("---")]
    rows = [re.split(r"\s{2,}", line.strip()) for line in lines]
    return {r[0]: r for r in rows[1:]}


def test_screenshot_shows_the_page_with_its_plots(slow_process, run, tmp_path):
    _, html = run
    png = screenshot(html, tmp_path / "shot.png", tmp_path / "profile", 1280, 2000)
    image = Image.open(png).convert("RGB")
    assert image.size == (1280, 2000)
    colours = image.getcolors(maxcolors=1 << 20)
    assert len(colours) > 500  # text, tables and plots, not a blank or error page
    counts = {c: n for n, c in colours}
    white = counts.get((255, 255, 255), 0)
    assert white < 0.95 * 1280 * 2000
    assert counts.get(TAB_BLUE, 0) > 2000  # the pyramid plot's bars were decoded and drawn
    assert counts.get(FINDING_BG, 0) > 5000  # the finding is shown, highlighted, near the top


def test_dom_tables_hold_the_terminal_numbers(slow_process, run, tmp_path):
    out, html = run
    page = parse(dump_dom(html, tmp_path / "profile"))
    text = format_report(out)
    lines = text.split("\n\n")[0].splitlines()
    headers = re.split(r"\s{2,}", lines[1].strip())
    terminal = {cells[0]: dict(zip(headers, cells)) for cells in (re.split(r"\s{2,}", l.strip()) for l in lines[3:])}
    assert page.tables[("syn", "summary")] == terminal
    assert terminal["spender"]["tokens"] == "1200000" and terminal["weak"]["C3"] == "0/10 nr1"  # not vacuous
    for section, title in (("rates", "Success per stage"), ("costs", "Cost and efficiency"),
                           ("honesty", "C5 self-report audit")):
        shown = {agent: list(cells.values()) for agent, cells in page.tables[("syn", section)].items()}
        assert shown == _terminal_table(text, title), section
    (finding,) = [line for line in text.splitlines() if line.startswith("FINDING")]
    assert finding in " ".join(page.text.split())


def test_images_decode_and_agent_markup_never_runs(slow_process, run, tmp_path):
    _, html = run
    text = html.read_text(encoding="utf-8")
    policy = re.compile(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">')
    (content,) = policy.findall(text)
    assert html_lib.unescape(content) == CSP  # the page forbids scripts and fetches ...
    # ... and the probe page drops that policy, so only the escaping stands between the agent's
    # markup and the page.
    probe = tmp_path / "probe.html"
    probe.write_text(policy.sub("", text).replace("</body>", PROBE + "</body>"), encoding="utf-8")
    dom = dump_dom(probe, tmp_path / "profile")
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom)
    assert found, "the probe did not run"
    result = json.loads(html_lib.unescape(found.group(1)))
    assert len(result["images"]) == 4 and all(w > 100 and h > 100 for w, h in result["images"])
    assert result["scripts"] == 1 and result["pwned"] is None  # the probe alone ran; the agent's markup did not
    page = parse(dom)
    assert [t["attrs"]["data-status"] for t in page.trials if t["attrs"]["data-trial"] == HOSTILE_TRIAL] == ["scored"]
    assert any(PAYLOAD in t for t in page.pres["log-tail"]) and PAYLOAD in page.text  # shown, as text
