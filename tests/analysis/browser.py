"""A real headless Chromium for the HTML report's tests (Debian's `chromium` package, which
scripts/setup.sh installs). Missing, it fails the test with the install line, never skips."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

TIMEOUT_S = 120


def chromium() -> str:
    """The chromium executable; fails the calling test when none is installed."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail("no chromium on PATH: apt-get install -y chromium (scripts/setup.sh installs it)")
    return found


def _run(page: Path, profile: Path, *flags: str) -> subprocess.CompletedProcess:
    # --no-sandbox: CI runs as root, where Chromium's own sandbox cannot start; the page is ours.
    argv = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
            "--force-device-scale-factor=1", f"--user-data-dir={profile}", *flags, page.resolve().as_uri()]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert res.returncode == 0, res.stderr[-2000:]
    return res


def dump_dom(page: Path, profile: Path) -> str:
    """The DOM after the page loaded (and its load handlers ran), serialised."""
    return _run(page, profile, "--virtual-time-budget=10000", "--dump-dom").stdout


def screenshot(page: Path, out: Path, profile: Path, width: int, height: int) -> Path:
    """A PNG of the page's first `width` x `height` CSS pixels."""
    _run(page, profile, f"--window-size={width},{height}", f"--screenshot={out}")
    assert out.is_file(), f"chromium wrote no screenshot at {out}"
    return out
