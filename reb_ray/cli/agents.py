"""`reb-ray agents list|install`: agent kinds, their pinned programs, and the node's toolchain."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Optional

import typer

from reb_ray.cli.aliases import either, old_name

app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Agent kinds and the agent toolchain (pinned CLIs, installed once per node).")

_DIR_HELP = "Toolchains directory (default ~/.cache/reb-ray/toolchains; $REB_RAY_CACHE_DIR moves it)."


def kind_rows(toolchain) -> list[dict]:
    """One row per agent kind: pinned package and version, whether
    its programs are installed in `toolchain` (True/False; None for kinds that install nothing)."""
    from reb_ray.models.agent import KINDS

    from reb_ray.agents.toolchain import NEXAU_PART, PINS

    rows = []
    nexau_version = None
    for kind in KINDS:
        pin = PINS.get(kind)
        if pin is not None:
            installed: bool | None = toolchain.installed(kind)
            where = ", ".join(toolchain.parts_of(kind)) if installed else None
        elif kind == "nexau":  # installed from a source checkout: its version is in the manifest
            manifest = toolchain.manifest(NEXAU_PART)
            installed, where = manifest is not None, NEXAU_PART if manifest else None
            nexau_version = manifest.get("version") if manifest else None
        else:
            installed, where = None, None
        version = pin.version if pin else nexau_version if kind == "nexau" else None
        rows.append({"kind": kind, "package": pin.package if pin else "nexau" if kind == "nexau" else None, "version": version,
                     "installed": installed, "parts": where})
    return rows


@app.command("list")
def list_kinds(
    toolchains_dir: Optional[Path] = typer.Option(None, "--toolchains-dir", help=_DIR_HELP),
    old_dir: Optional[Path] = old_name("--dir", "--toolchains-dir"),
    as_json: bool = typer.Option(False, "--json", help="JSON Lines: one object per kind."),
) -> None:
    """Agent kinds, their pinned versions and whether each is installed."""
    from reb_ray.agents.toolchain import NEXAU_INSTALL_HINT, Toolchain, node_version

    toolchain = Toolchain.current(either(toolchains_dir, old_dir, "--dir", "--toolchains-dir"))
    rows = kind_rows(toolchain)
    if as_json:
        for row in rows:
            typer.echo(json.dumps(row))
        return
    typer.echo(f"toolchain {toolchain.path} (node {node_version()})")
    for row in rows:
        if row["kind"] == "nexau":
            pinned = f"nexau {row['version']} (source checkout)" if row["version"] else "nexau (source checkout)"
        else:
            pinned = f"{row['package']}@{row['version']}" if row["package"] else "built in"
        installed = {True: "installed", False: "not installed", None: "-"}[row["installed"]]
        if row["kind"] == "nexau" and not row["installed"]:
            installed += f" ({NEXAU_INSTALL_HINT})"
        typer.echo(f"  {row['kind']:<15} {pinned:<36} {installed}")


@app.command("install")
def install(
    kinds: Optional[str] = typer.Option(None, help="Comma-separated kinds to install (default: every kind with a pinned program: codex,claude_code,mini_swe_agent)."),
    toolchains_dir: Optional[Path] = typer.Option(None, "--toolchains-dir", help=_DIR_HELP),
    old_dir: Optional[Path] = old_name("--dir", "--toolchains-dir"),
    profile: Optional[str] = typer.Option(None, "--profile", help="Sandbox image profile whose python builds the mini-swe-agent venv (default minimal)."),
    old_profile: Optional[str] = old_name("--image-profile", "--profile"),
    nexau_src: Optional[Path] = typer.Option(None, help="A NexAU source checkout (nex-agi/NexAU): also installs kind nexau."),
    nexau_python: Optional[Path] = typer.Option(None, help="A self-contained Python >= 3.12 for NexAU (default: found on PATH or in ~/.pyenv)."),
) -> None:
    """Install the pinned agent programs into this node's toolchain; what is there is kept.

    Prints each part's time and size. Needs npm registry access (codex, claude_code), and PyPI
    access plus Docker and the sandbox image (mini_swe_agent, nexau).
    """
    from reb_ray.agents.toolchain import PINS, Toolchain
    from reb_ray.agents.toolchain_install import install as run_install

    wanted = [k.strip() for k in kinds.split(",") if k.strip()] if kinds is not None else list(PINS)
    if not wanted:
        raise typer.BadParameter("--kinds is empty")
    if nexau_src is not None and "nexau" not in wanted:
        wanted.append("nexau")
    toolchain = Toolchain.current(either(toolchains_dir, old_dir, "--dir", "--toolchains-dir"))
    image = client = None
    if "mini_swe_agent" in wanted or "nexau" in wanted:
        from reb_ray.sandbox.docker.docker_client import connect
        from reb_ray.sandbox.docker.image import DEFAULT_PROFILE, require_image

        client = connect()
        image = require_image(client, either(profile, old_profile, "--image-profile", "--profile") or DEFAULT_PROFILE)
    start = time.monotonic()
    reports = run_install(wanted, toolchain, image=image, client=client, nexau_src=nexau_src, nexau_python=nexau_python)
    for r in reports:
        size = f"{r.bytes / 1e6:.0f} MB" if r.bytes is not None else "size unknown"
        what = f"installed in {r.seconds:.1f} s" if r.status == "installed" else "already installed"
        typer.echo(f"{r.part}: {what}, {size}")
    total = sum(r.bytes or 0 for r in reports)
    typer.echo(f"toolchain {toolchain.path}: {total / 1e6:.0f} MB, {time.monotonic() - start:.1f} s")
