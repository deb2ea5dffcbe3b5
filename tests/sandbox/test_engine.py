"""The engine side of a provider, declared on the `Sandbox` base: what each provider class says
about its engine agrees with its capabilities, a provider without an engine answers with the
documented defaults, and the steps between the phases take the one-exec path only where the
provider hands over a leftovers' kill script.

The unit tier checks the classes and real local and sleeping sandboxes; the docker path of
`settle` is tests/test_between_phases.py's (a real daemon).
"""

from __future__ import annotations

import subprocess
import time

import pytest

from reb_ray.errors import RebRayError
from reb_ray.sandbox import PROVIDERS, Sandbox, SandboxConfig, open_sandbox, provider_class
from reb_ray.sandbox.tap import TappedSandbox
from reb_ray.trial.between_phases import settle

ENGINE_METHODS = ("connect_engine", "wait_for_engine", "require_image", "image_fix", "start_warnings")


def _overrides(cls: type[Sandbox], name: str) -> bool:
    return getattr(cls, name).__func__ is not getattr(Sandbox, name).__func__


@pytest.mark.parametrize("name", PROVIDERS)
def test_a_provider_has_an_engine_exactly_when_it_runs_from_an_image(name):
    """`capabilities.image` (the harness waits for a daemon, checks and ships the image) and the
    engine methods are one statement: a provider that runs from an image names its engine and
    overrides every engine method; one that does not keeps every default."""
    cls = provider_class(name)
    has_engine = cls.capabilities.image
    assert (cls.engine_name is not None) == has_engine, name
    assert [m for m in ENGINE_METHODS if _overrides(cls, m) != has_engine] == [], name


@pytest.mark.parametrize("name", PROVIDERS)
def test_a_kill_script_that_spares_only_the_init_runs_only_in_a_process_namespace_of_its_own(name):
    """`leftovers_script` kills every process but PID 1: on a provider whose processes are the
    host's it would kill the host's. So a provider with one has its own processes and runs
    commands in a container (a root user to run it as)."""
    cls = provider_class(name)
    if cls.leftovers_script is not None:
        assert cls.capabilities.own_processes and cls.capabilities.container_runtime is not None
        assert "kill -9" in cls.leftovers_script and " 1 $$ $PPID " in cls.leftovers_script


def test_the_container_providers_hand_over_their_kill_script():
    assert provider_class("docker").leftovers_script is not None
    assert provider_class("podman").leftovers_script == provider_class("docker").leftovers_script
    assert provider_class("local").leftovers_script is None is provider_class("sleep").leftovers_script
    assert provider_class("docker").builds_images and not provider_class("podman").builds_images
    assert (provider_class("docker").engine_name, provider_class("podman").engine_name) == ("docker", "podman")


@pytest.mark.parametrize("name", ["local", "sleep"])
def test_a_provider_without_an_engine_answers_with_the_defaults(name):
    cls = provider_class(name)
    started = time.monotonic()
    assert cls.wait_for_engine() is None
    assert time.monotonic() - started < 0.5  # nothing to wait for
    assert cls.start_warnings() == [] and cls.builds_images is False and cls.engine_name is None
    with pytest.raises(RebRayError, match=f"sandbox provider '{name}' runs no container engine"):
        cls.connect_engine(timeout=1)
    with pytest.raises(RebRayError, match=f"sandbox provider '{name}' runs no image.*'minimal'"):
        cls.require_image(None, "minimal")  # type: ignore[arg-type]
    assert cls.image_fix("reb-ray/sandbox:minimal-x") == f"the {name} sandbox runs no image"


def test_the_local_sandbox_refuses_another_user_and_the_sleeping_one_takes_any(monkeypatch, tmp_path):
    with open_sandbox("local", SandboxConfig(), trusted=True) as box:
        assert box.exec(["true"], user=None).ok
        with pytest.raises(ValueError, match="harness's own user, not as 'root'"):
            box.exec(["true"], user="root")
    script = tmp_path / "script.json"
    script.write_text('{"default": {"agent_s": 0, "probe_s": 0}}')
    monkeypatch.setenv("REB_RAY_SLEEP_SCRIPT", str(script))
    with open_sandbox("sleep", SandboxConfig(trial_id="t")) as box:
        assert box.exec(["true"], user="root").ok


def test_a_sandbox_without_a_kill_script_is_settled_step_by_step(tmp_path):
    """A local sandbox (and a tapped view of it) takes the steps one by one: its leftovers are
    host processes, which only its own process-group kill may touch."""
    with open_sandbox("local", SandboxConfig(), trusted=True) as box:
        repo = f"{box.workdir}/repo"
        subprocess.run(["git", "init", "-q", repo], check=True)
        box.write_bytes(f"{box.workdir}/report.json", b'{"python_path": "/usr/bin/python3"}')
        leftover = subprocess.Popen(["sleep", "60"])  # a host process of this test: never the sandbox's
        try:
            box.exec(["sh", "-c", "sleep 1003 >/dev/null 2>&1 &"])
            tapped = TappedSandbox(box, None)
            assert tapped.leftovers_script is None
            got = settle(tapped, f"{box.workdir}/report.json", repo)
            assert not got.one_exec
            assert got.report == b'{"python_path": "/usr/bin/python3"}' and got.report_error is None
            assert got.stopped == ["sleep 1003"] and got.state == {}
            assert leftover.poll() is None  # the host's own process lives on
        finally:
            leftover.kill()
            leftover.wait()
