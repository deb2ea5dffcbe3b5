"""The viewer driven in a real headless Chromium (Debian's `chromium`, through Playwright) on a
real sweep's output: `run_sweep` with Ray, the local sandbox and the demo suite, two agents (the
built-in `noop` and an agent that runs commands, so trial pages have a trajectory.json with
steps). A person's path through it: the overview, a filter on the matrix, a trial page with its
trajectory and a log, the side-by-side page; and every page at 1280x800 keeps its content
inside the viewport (nothing wider than the window, no element past its right edge, except
inside a box that scrolls on its own).

Screenshots go to the test's temporary directory, or to $REB_RAY_VIEWER_SHOTS when set (to look
at them)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from urllib.parse import urlencode

import pytest

from tests.analysis.browser import chromium
from tests.viewer.served import Served

STEPS_AGENT = "tests.viewer.test_trajectory_file:StepsAgent"
TASKS = ["import-name-mismatch", "numpy-trainer"]
WIDTH, HEIGHT = 1280, 800

#: Elements whose box passes the viewport's right edge, outside any box that clips or scrolls
#: (overflow-x other than visible): those are what a reader cannot reach.
OVERFLOW_JS = """() => {
  const vw = document.documentElement.clientWidth, bad = [];
  for (const el of document.querySelectorAll('body *')) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) continue;
    let p = el.parentElement, clipped = false;
    while (p && p !== document.body) {
      if (getComputedStyle(p).overflowX !== 'visible') { clipped = true; break; }
      p = p.parentElement;
    }
    if (!clipped && (r.right > vw + 1 || r.left < -1))
      bad.push(`${el.tagName.toLowerCase()}.${el.className} [${Math.round(r.left)}, ${Math.round(r.right)}]`);
  }
  return {scrollWidth: document.documentElement.scrollWidth, width: vw, bad: bad.slice(0, 10)};
}"""


@pytest.fixture(scope="module")
def sweep(tmp_path_factory, ray_local):
    from reb_ray.models.sweep import SweepConfig
    from reb_ray.sweep.run import run_sweep

    out = tmp_path_factory.mktemp("viewer-sweep") / "runs"
    config = SweepConfig(output=out, suite="demo", tasks=",".join(TASKS), agents=["noop", STEPS_AGENT],
                         sandbox="local", max_concurrent=2, sweep_id=f"view-{uuid.uuid4().hex[:6]}", wheelhouses=[],
                         pip_cache=False)
    result = run_sweep(config, show_progress=False)
    assert result.attempts == 4
    return out, result.sweep_id


@pytest.fixture(scope="module")
def served(sweep):
    s = Served(sweep[0])
    s.wait_summary()
    yield s
    s.close()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        # --no-sandbox: CI runs as root, where Chromium's own sandbox cannot start; the pages are ours.
        b = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT}, device_scale_factor=1)
    p = context.new_page()
    errors: list[str] = []
    p.on("pageerror", lambda exc: errors.append(str(exc)))
    p.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    yield p
    context.close()
    assert errors == []  # no script error, no missing stylesheet or broken link followed


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    where = os.environ.get("REB_RAY_VIEWER_SHOTS")
    path = Path(where) if where else tmp_path_factory.mktemp("shots")
    path.mkdir(parents=True, exist_ok=True)
    return path


def test_a_person_browses_the_sweep(served, sweep, page):
    _, sweep_id = sweep
    page.goto(served.base + "/")
    assert page.locator("h1").first.inner_text()
    # The overview names the sweep and its agents, and links to its matrix.
    body = page.locator("main").inner_text()
    assert sweep_id in body and "noop" in body and STEPS_AGENT in body
    page.click(f"a[href='/matrix?{urlencode({'sweep': sweep_id})}']")
    page.wait_for_url("**/matrix?*")
    assert page.locator("#matrix a.sq").count() == 4
    # A filter: one agent; the form submits, the URL carries it, the matrix shrinks to its trials.
    page.select_option("select[name=agent]", STEPS_AGENT)
    page.click("form.filters button[type=submit]")
    page.wait_for_url("**agent=*")
    assert page.locator("#matrix a.sq").count() == 2
    assert "2 trial(s) on 2 task(s) match" in page.locator("#counts").inner_text()
    # A trial page: its trajectory (from trajectory.json) with the commands and their exits.
    page.locator("#matrix a.sq").first.click()
    page.wait_for_url("**/trial?*")
    steps = page.locator(".step")
    assert steps.count() == 8  # the prompt's two parts, three execs, three commands the first announced
    assert "pip install nosuchpkg" in steps.nth(4).inner_text() and "exit 1" in steps.nth(4).inner_text()
    assert page.locator("ul.files a", has_text="trajectory.json").count() == 1
    # A log: the agent's full log streams as text.
    page.locator("ul.files li", has_text="agent log").locator("a").first.click()
    page.wait_for_url("**/log?*")
    text = page.locator("body").inner_text()
    assert "[heuristic] $ python3 -m venv" in text and "no such thing" in text
    page.go_back()
    # The side-by-side page from the matrix's compare link.
    page.goto(served.base + "/matrix?" + urlencode({"sweep": sweep_id}))
    page.locator("#matrix a", has_text="compare").first.click()
    page.wait_for_url("**/compare?*")
    compare = page.locator("main").inner_text()
    assert "noop" in compare and STEPS_AGENT in compare
    assert page.locator(".step").count() >= 8  # the steps agent's trajectory beside noop's


def test_the_pictures_load_and_have_content(served, sweep, page, shots):
    """Each picture of the overview and the compare page loads in Chromium under the viewer's
    policy (an image that failed has no natural size; a 4xx/5xx fails the page fixture), fits
    the 1280-pixel window, and is drawn: many colours, not a blank box."""
    from PIL import Image

    _, sweep_id = sweep
    for name, path, count in (("overview", "/", 3),
                              ("compare", "/compare?" + urlencode({"sweep": sweep_id, "task": TASKS[1], "a": "noop",
                                                                   "b": STEPS_AGENT}), 1)):
        page.goto(served.base + path)
        page.wait_for_load_state("networkidle")
        images = page.locator("img.plot")
        assert images.count() == count, name
        for i in range(count):
            image = images.nth(i)
            image.scroll_into_view_if_needed()
            size = image.evaluate("i => [i.complete, i.naturalWidth, i.naturalHeight, i.getBoundingClientRect().right]")
            assert size[0] and size[1] > 300 and size[2] > 100 and size[3] <= WIDTH, (name, i, size)
            shot = shots / f"{name}-picture-{i}.png"
            image.screenshot(path=str(shot))
            assert len(Image.open(shot).convert("RGB").getcolors(maxcolors=1_000_000)) > 20, (name, i)


def _pages(sweep_id: str, trial_id: str) -> dict[str, str]:
    return {"overview": "/", "matrix": "/matrix?" + urlencode({"sweep": sweep_id}),
            "matrix-filtered": "/matrix?" + urlencode({"sweep": sweep_id, "agent": STEPS_AGENT, "status": "scored"}),
            "trial": "/trial?" + urlencode({"sweep": sweep_id, "id": trial_id}),
            "compare": "/compare?" + urlencode({"sweep": sweep_id, "task": TASKS[1], "a": "noop", "b": STEPS_AGENT})}


@pytest.mark.parametrize("name", ["overview", "matrix", "matrix-filtered", "trial", "compare"])
def test_nothing_overflows_at_1280x800(served, sweep, page, shots, name):
    from PIL import Image

    _, sweep_id = sweep
    page.goto(served.base + _pages(sweep_id, f"{STEPS_AGENT}/{TASKS[1]}/0")[name])
    page.wait_for_load_state("networkidle")
    shot = shots / f"{name}.png"
    page.screenshot(path=str(shot))
    found = page.evaluate(OVERFLOW_JS)
    assert found["width"] == WIDTH and found["scrollWidth"] <= WIDTH, found
    assert found["bad"] == [], found
    image = Image.open(shot).convert("RGB")
    assert image.size == (WIDTH, HEIGHT)
    assert len(image.getcolors(maxcolors=1_000_000)) > 20  # drawn, not blank
    if name == "trial":  # the whole page too, for a person to look at
        page.screenshot(path=str(shots / "trial-full.png"), full_page=True)
