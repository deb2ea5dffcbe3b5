"""The agent toolchain: keyed by its pins, built atomically and once, and runnable in the sandbox."""

from __future__ import annotations

import dataclasses
import json
import subprocess

import pytest

from reb_ray.agents import toolchain as tc
from reb_ray.agents.toolchain import PINS, TOOLCHAIN_SANDBOX_PATH, Toolchain, toolchain_key
from reb_ray.agents.toolchain_install import _build_node, _install_part, install
from reb_ray.errors import RebRayError, UnknownName
from reb_ray.sandbox import SandboxConfig, open_sandbox


def test_the_key_changes_with_any_pin_or_the_layout(monkeypatch):
    key = toolchain_key()
    bumped = {**PINS, "codex": dataclasses.replace(PINS["codex"], version="0.172.0")}
    monkeypatch.setattr(tc, "PINS", bumped)
    assert toolchain_key() != key
    monkeypatch.setattr(tc, "PINS", PINS)
    assert toolchain_key() == key
    monkeypatch.setattr(tc, "LAYOUT", tc.LAYOUT + "x")
    assert toolchain_key() != key


def test_the_default_location_follows_the_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("REB_RAY_CACHE_DIR", str(tmp_path))
    assert Toolchain.current().path == tmp_path / "toolchains" / toolchain_key()
    assert Toolchain.current(tmp_path / "elsewhere").path == tmp_path / "elsewhere" / toolchain_key()


def test_a_part_is_built_once_atomically_and_a_damaged_one_is_rebuilt(slow_process, tmp_path):
    toolchain = Toolchain(tmp_path / "key")
    toolchain.ensure_root()
    first = _install_part(toolchain, "node", _build_node)
    assert first.status == "installed" and first.seconds > 0 and first.bytes > 50e6
    manifest = toolchain.manifest("node")
    assert manifest["version"] == tc.node_version() and manifest["bytes"] == first.bytes
    assert subprocess.run([str(toolchain.path / "bin" / "node"), "--version"], capture_output=True, text=True).stdout.startswith("v")
    again = _install_part(toolchain, "node", _build_node)
    assert again.status == "present" and again.seconds == 0
    (toolchain.part_dir("node") / "MANIFEST.json").unlink()  # a half-copied part from an old crash
    assert _install_part(toolchain, "node", _build_node).status == "installed"
    assert list((tmp_path / ".building").iterdir()) == []


def test_a_failed_build_leaves_no_part_and_no_temporary_directory(tmp_path):
    toolchain = Toolchain(tmp_path / "key")
    toolchain.ensure_root()

    def broken(tmp):
        tmp.mkdir(parents=True)
        (tmp / "half").write_text("x")
        raise OSError(28, "No space left on device")

    with pytest.raises(RebRayError, match="cannot install toolchain part codex.*No space left"):
        _install_part(toolchain, "codex", broken)
    assert not toolchain.part_dir("codex").exists() and list((tmp_path / ".building").iterdir()) == []
    assert not toolchain.installed("codex")


def test_wrappers_say_in_one_line_what_to_install(tmp_path):
    toolchain = Toolchain(tmp_path / "key")
    toolchain.ensure_root()
    for command, kind in (("codex", "codex"), ("claude", "claude_code"), ("mini", "mini_swe_agent")):
        res = subprocess.run([str(toolchain.path / "bin" / command), "--version"], capture_output=True, text=True)
        assert res.returncode == 127 and res.stdout == ""
        assert res.stderr.count("\n") == 1 and f"reb-ray agents install --kinds {kind}" in res.stderr, res.stderr


def test_unknown_kinds_are_refused_before_anything_is_built(tmp_path):
    with pytest.raises(UnknownName, match="valid: claude_code, codex, mini_swe_agent"):
        install(["heuristic"], Toolchain(tmp_path / "key"))
    assert not (tmp_path / "key").exists()


@pytest.mark.docker
def test_the_pinned_clis_run_inside_the_sandbox(installed_toolchain, sandbox_image):
    for kind in PINS:
        assert installed_toolchain.installed(kind), kind
    mini = json.loads((installed_toolchain.path / installed_toolchain.mini_swe_agent_parts()[0] / "MANIFEST.json").read_text())
    assert mini["version"] == PINS["mini_swe_agent"].version and any(f.startswith("mini-swe-agent==") for f in mini["freeze"])
    again = install(list(PINS), installed_toolchain, image=sandbox_image)  # idempotent: nothing is rebuilt
    assert {r.status for r in again} == {"present"}
    config = SandboxConfig(image=sandbox_image, sweep_id="test", trial_id="toolchain-clis",
                           mounts={str(installed_toolchain.path): TOOLCHAIN_SANDBOX_PATH})
    with open_sandbox("docker", config) as sandbox:
        env = {"PATH": f"{TOOLCHAIN_SANDBOX_PATH}/bin:/usr/local/bin:/usr/bin:/bin"}
        versions = {cmd: sandbox.exec([cmd, *args], timeout=120, env=env) for cmd, args in
                    (("node", ["--version"]), ("codex", ["--version"]), ("claude", ["--version"]), ("mini", ["--help"]))}
    assert versions["node"].output.strip() == f"v{tc.node_version()}"
    assert versions["codex"].output.strip() == f"codex-cli {PINS['codex'].version}"
    assert versions["claude"].output.strip() == f"{PINS['claude_code'].version} (Claude Code)"
    assert f"mini-swe-agent version {PINS['mini_swe_agent'].version}" in versions["mini"].output
    assert all(r.exit_code == 0 for r in versions.values()), {k: r.output[-300:] for k, r in versions.items()}


def test_installers_running_at_once_build_a_part_once(tmp_path):
    """Two installers of one part at the same moment (two sweeps, or two test workers): the
    second waits on the part's lock and finds it present; the build ran once."""
    import threading
    import time

    toolchain = Toolchain(tmp_path / "key")
    toolchain.ensure_root()
    builds = []

    def build(into):
        builds.append(into)
        time.sleep(0.5)  # long enough for the other installer to arrive while this one builds
        into.mkdir(parents=True)
        (into / "tool").write_text("x")
        return {"version": "1"}

    reports = []
    threads = [threading.Thread(target=lambda: reports.append(_install_part(toolchain, "codex", build))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(builds) == 1 and sorted(r.status for r in reports) == ["installed", "present"]
    assert list((tmp_path / ".building").iterdir()) == []
