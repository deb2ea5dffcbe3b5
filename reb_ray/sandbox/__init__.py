"""Sandboxes: where trials run. `open_sandbox(provider, config)` picks the provider by name.

The name is read here only: what a provider can do is its class's `capabilities`, asked of an
open sandbox (`sandbox.capabilities`) or, before one exists, of the name (`capabilities_of`).
"""

from __future__ import annotations

from reb_ray.errors import UnknownName
from reb_ray.sandbox.base import ExecResult, Sandbox, SandboxCapabilities, SandboxConfig, SandboxSize, UnreadableFile

PROVIDERS = ("docker", "podman", "local", "sleep")


def provider_class(provider: str) -> type[Sandbox]:
    """The Sandbox class of `provider` (imported on first use: the docker SDK only when needed).
    Raises UnknownName for a name that is not in PROVIDERS."""
    if provider == "docker":
        from reb_ray.sandbox.docker.docker_sandbox import DockerSandbox

        return DockerSandbox
    if provider == "podman":
        from reb_ray.sandbox.docker.podman_sandbox import PodmanSandbox

        return PodmanSandbox
    if provider == "local":
        from reb_ray.sandbox.local import LocalSandbox

        return LocalSandbox
    if provider == "sleep":
        from reb_ray.sandbox.sleeping import SleepingSandbox

        return SleepingSandbox
    raise UnknownName("sandbox provider", provider, list(PROVIDERS))


def capabilities_of(provider: str) -> SandboxCapabilities:
    """What sandboxes of `provider` can do, for code that has only the sweep's config (before a
    sandbox opens). Raises UnknownName for a name that is not in PROVIDERS."""
    return provider_class(provider).capabilities


def open_sandbox(provider: str, config: SandboxConfig, *, trusted: bool = False, allow_unsafe: bool = False) -> Sandbox:
    """Create a sandbox of `provider` ("docker"; "podman": a rootful or rootless Podman service,
    reb_ray.sandbox.docker.podman_sandbox; "local"; or "sleep": scripted sleeps for scheduling
    benchmarks, reb_ray.sandbox.sleeping).

    `trusted` marks a built-in agent (noop, heuristic); the local provider refuses others
    unless `allow_unsafe`. Raises UnknownName, DockerUnavailable, ImageMissing, UnsafeSandbox.
    """
    cls = provider_class(provider)
    if provider == "local":
        return cls(config, trusted=trusted, allow_unsafe=allow_unsafe)  # type: ignore[call-arg]
    return cls(config)  # type: ignore[call-arg]


__all__ = ["PROVIDERS", "ExecResult", "Sandbox", "SandboxCapabilities", "SandboxConfig", "SandboxSize", "UnreadableFile",
           "capabilities_of", "open_sandbox", "provider_class"]
