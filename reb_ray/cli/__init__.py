"""The `reb-ray` command line: one sub-app per noun, each thin over the library."""

from __future__ import annotations

import sys

import typer

from reb_ray import __version__
from reb_ray.cli import agents, assets, cluster, compact, doctor, image, llm, mirror, regrade, report, sandbox, sweep, tasks, trial
from reb_ray.cli import view
from reb_ray.cli.exits import HELP_TABLE
from reb_ray.cli import env  # environment artifacts
from reb_ray.errors import RebRayError

app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, add_completion=False, help="Evaluate environment-synthesis agents on Ray.",
                  epilog=HELP_TABLE)
app.command("doctor")(doctor.doctor)
app.command("sweep")(sweep.sweep)
app.command("regrade")(regrade.regrade)
app.command("report")(report.report)
app.command("compact")(compact.compact)
app.command("mirror")(mirror.mirror)
app.command("view")(view.view)
app.command("export-trajectories")(view.export_trajectories)
app.add_typer(image.app, name="image")
app.add_typer(sandbox.app, name="sandbox")
app.add_typer(tasks.app, name="tasks")
app.add_typer(assets.app, name="assets")
app.add_typer(llm.app, name="llm")
app.add_typer(agents.app, name="agents")
app.add_typer(trial.app, name="trial")
app.add_typer(cluster.app, name="cluster")
app.add_typer(env.app, name="env")  # environment artifacts


def _version(value: bool) -> None:
    if value:
        typer.echo(f"reb-ray {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    """reb-ray: agents x tasks x trials in Docker sandboxes on a Ray cluster."""


def main() -> None:
    """Console entry point: user errors print one line on stderr and exit 2."""
    try:
        # Without standalone mode, click returns an Exit's code instead of exiting.
        code = app(standalone_mode=False)
        sys.exit(code if isinstance(code, int) else 0)
    except RebRayError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("interrupted: finished trials are saved; run the same command again to resume", err=True)
        sys.exit(130)
    except Exception as exc:  # click usage errors arrive here in non-standalone mode
        # Duck-typed: typer >= 0.22 raises its own vendored copy of click's exceptions.
        if hasattr(exc, "format_message") and isinstance(getattr(exc, "exit_code", None), int):
            message = " ".join(exc.format_message().split())
            command = getattr(getattr(exc, "ctx", None), "command_path", None) or "reb-ray"
            typer.echo(f"error: {message} (see: {command} --help)", err=True)
            sys.exit(2)
        raise
