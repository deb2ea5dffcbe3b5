"""Sandboxes: where trials run. `open_sandbox(provider, config)` picks the provider by name."""

from __future__ import annotations

from reb_ray.errors import UnknownName
from reb_ray.sandbox.base import ExecResult, Sandbox, SandboxConfig, SandboxSize, UnreadableFile

PROVIDERS = ("docker", "local", "sleep")


def open_sandbox(provider: str, config: SandboxConfig, *, trusted: bool = False, allow_unsafe: bool = False) -> Sandbox:
    """Create a sandbox of `provider` ("docker", "local", or "sleep": scripted sleeps for
    scheduling benchmarks, reb_ray/sandbox/sleeping.py).

    `trusted` marks a built-in agent (noop, heuristic); the local provider refuses others
    unless `allow_unsafe`. Raises UnknownName, DockerUnavailable, ImageMissing, UnsafeSandbox.
    """
    if provider == "docker":
        from reb_ray.sandbox.docker_sandbox import DockerSandbox

        return DockerSandbox(config)
    if provider == "local":
        from reb_ray.sandbox.local import LocalSandbox

        return LocalSandbox(config, trusted=trusted, allow_unsafe=allow_unsafe)
    if provider == "sleep":
        from reb_ray.sandbox.sleeping import SleepingSandbox

        return SleepingSandbox(config)
    raise UnknownName("sandbox provider", provider, list(PROVIDERS))


__all__ = ["PROVIDERS", "ExecResult", "Sandbox", "SandboxConfig", "SandboxSize", "UnreadableFile", "open_sandbox"]
