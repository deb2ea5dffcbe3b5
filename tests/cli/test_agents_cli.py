"""`reb-ray agents list|install`: kinds, pinned versions, installed or not; one-line errors."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from reb_ray.agents.toolchain import PINS, toolchain_key
from tests.cli.in_process import run_cli

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str) -> subprocess.CompletedProcess:
    """The CLI of this checkout, in this process (tests.cli.in_process)."""
    return run_cli(*args)


def test_list_shows_every_kind_with_its_pin_and_state(tmp_path):
    res = run("agents", "list", "--toolchains-dir", str(tmp_path), "--json")
    assert res.returncode == 0, res.stderr
    rows = {r["kind"]: r for r in map(json.loads, res.stdout.splitlines())}
    assert list(rows) == ["codex", "claude_code", "mini_swe_agent", "nexau", "command", "heuristic", "noop", "reference"]
    for kind, pin in PINS.items():
        assert (rows[kind]["package"], rows[kind]["version"], rows[kind]["installed"]) == (pin.package, pin.version, False)
    assert rows["heuristic"]["installed"] is None
    assert (rows["nexau"]["package"], rows["nexau"]["version"], rows["nexau"]["installed"]) == ("nexau", None, False)
    text = run("agents", "list", "--toolchains-dir", str(tmp_path)).stdout
    assert str(tmp_path / toolchain_key()) in text and "@openai/codex@0.171.0" in text and "not installed" in text
    nexau = next(line for line in text.splitlines() if line.strip().startswith("nexau"))
    assert "not installed (reb-ray agents install --kinds nexau --nexau-src DIR)" in nexau


def test_install_builds_reports_and_is_idempotent(slow_process, tmp_path):
    first = run("agents", "install", "--kinds", "codex", "--toolchains-dir", str(tmp_path))
    assert first.returncode == 0, first.stderr
    assert [line.split(":")[0] for line in first.stdout.splitlines()] == ["node", "codex", f"toolchain {tmp_path / toolchain_key()}"]
    assert "node: installed in" in first.stdout and "codex: installed in" in first.stdout and " MB" in first.stdout
    second = run("agents", "install", "--kinds", "codex", "--toolchains-dir", str(tmp_path))
    assert "codex: already installed" in second.stdout and "installed in" not in second.stdout
    rows = {r["kind"]: r for r in map(json.loads, run("agents", "list", "--toolchains-dir", str(tmp_path), "--json").stdout.splitlines())}
    assert rows["codex"]["installed"] is True and rows["claude_code"]["installed"] is False


def test_install_of_a_kind_with_nothing_to_install_is_one_line():
    res = run("agents", "install", "--kinds", "heuristic")
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert res.stderr.startswith("error: unknown installable agent kind 'heuristic'; valid: claude_code, codex, mini_swe_agent")


@pytest.mark.integration
def test_nexau_needs_a_source_checkout_one_line(tmp_path):
    res = run("agents", "install", "--kinds", "nexau", "--toolchains-dir", str(tmp_path))
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert "nexau is installed from a source checkout: give --nexau-src DIR" in res.stderr
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "pyproject.toml").write_text('[project]\nname = "other"\n')
    res = run("agents", "install", "--nexau-src", str(tmp_path / "src"), "--kinds", "nexau", "--toolchains-dir", str(tmp_path))
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "names project 'other', not 'nexau'" in res.stderr
