"""The viewer in a real headless Chromium (Debian's `chromium`, as the HTML report's browser
tests use): pages render to a non-blank screenshot at 1280x800, and an agent's markup in a
trial page does not run."""

from __future__ import annotations

import subprocess
from urllib.parse import urlencode

import pytest

from tests.analysis.browser import TIMEOUT_S, chromium
from reb_ray.testing.synthetic import HOSTILE_TRIAL
from tests.viewer.runs import CLAUDE_TRIAL, SWEEP, write_run
from tests.viewer.served import Served


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    s = Served(write_run(tmp_path_factory.mktemp("browser") / "run"))
    s.wait_summary()
    yield s
    s.close()


def _chromium(url: str, profile, *flags: str) -> subprocess.CompletedProcess:
    # --no-sandbox: CI runs as root, where Chromium's own sandbox cannot start; the pages are ours.
    argv = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
            "--force-device-scale-factor=1", f"--user-data-dir={profile}", *flags, url]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert res.returncode == 0, res.stderr[-2000:]
    return res


@pytest.mark.parametrize("path", ["/", f"/matrix?{urlencode({'sweep': SWEEP})}",
                                  f"/trial?{urlencode({'sweep': SWEEP, 'id': CLAUDE_TRIAL})}"])
def test_pages_render_in_chromium(slow_process, served, tmp_path, path):
    from PIL import Image

    shot = tmp_path / "page.png"
    _chromium(served.base + path, tmp_path / "profile", "--window-size=1280,800", f"--screenshot={shot}")
    image = Image.open(shot).convert("RGB")
    assert image.size == (1280, 800)
    colours = image.getcolors(maxcolors=1_000_000)
    background = max(colours)[1]
    drawn = sum(n for n, c in colours if c != background)
    assert len(colours) > 20 and drawn > 0.02 * 1280 * 800, (len(colours), drawn)
    header = image.crop((0, 0, 1280, 20)).getcolors(maxcolors=100_000)
    assert max(header)[1] == (0x24, 0x29, 0x2F)  # the stylesheet loaded: the dark header bar


def test_agent_markup_does_not_run(slow_process, served, tmp_path):
    dom = _chromium(served.base + f"/trial?{urlencode({'sweep': SWEEP, 'id': HOSTILE_TRIAL})}", tmp_path / "profile",
                    "--virtual-time-budget=5000", "--dump-dom").stdout
    assert "data-pwned" in dom  # the payload is on the page, as text
    assert '<html lang="en">' in dom and 'data-pwned="' not in dom.split(">", 1)[0]
