"""`reb-ray doctor`."""

from __future__ import annotations

from typing import Optional

import typer

_STYLE = {"ok": "green", "warn": "yellow", "fail": "red"}


def doctor(profile: Optional[str] = typer.Option(None, help="Sandbox image profile to check (paper | minimal; default: $REB_RAY_IMAGE_PROFILE, else minimal)."),
           sandbox: str = typer.Option("docker", help="docker | podman: the engine whose set-up is checked.")) -> None:
    """Check Docker (or the Podman service), the sandbox image, GPUs and NVIDIA runtime (or CDI
    specs), Ray, pyright and free disk."""
    from rich.console import Console
    from rich.table import Table

    from reb_ray.node.doctor import run_checks
    from reb_ray.sandbox import capabilities_of
    from reb_ray.sandbox.docker.image import DEFAULT_PROFILE, get_profile

    profile = profile or DEFAULT_PROFILE
    get_profile(profile)
    capabilities_of(sandbox)  # an unknown provider name fails here, with the known ones
    from reb_ray.agents.toolchain import toolchains_root

    checks = run_checks(profile, sandbox, toolchains_root())  # a podman service's user must reach the toolchains
    table = Table(show_header=True, header_style="bold")
    for column in ("check", "status", "detail"):
        table.add_column(column, overflow="fold")
    for check in checks:
        table.add_row(check.name, f"[{_STYLE[check.level]}]{check.level}[/]", check.detail)
    console = Console(width=160)
    console.print(table)
    # The node's fingerprint, as every trials row records it (reb_ray.environment.fingerprint).
    from reb_ray.environment.fingerprint import fingerprint

    node = fingerprint(sandbox)
    console.print("fingerprint: " + ", ".join(f"{k}={'null' if v is None else v}" for k, v in node.items()),
                  soft_wrap=True, markup=False, highlight=False)
    # Each fix on one unbroken line, so a command or URL can be copied as printed.
    for check in checks:
        if check.fix and check.level != "ok":
            console.print(f"fix {check.name}: {check.fix}", soft_wrap=True, markup=False, highlight=False)
    if any(check.level == "fail" for check in checks):
        raise typer.Exit(1)
