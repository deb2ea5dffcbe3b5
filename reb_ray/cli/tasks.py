"""`reb-ray tasks list|validate`: inspect and check task suites."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from reb_ray.models.task import TaskSpec, list_suites, load_suite

app = typer.Typer(no_args_is_help=True, help="List and validate task suites.")

_SUITE_HELP = "Only this suite (default: every suite)."
_ROOT_HELP = "Tasks directory holding <suite>/<task-id>/task.toml (default: the bundled tasks)."


def _suites(suite: str | None, root: Path | None) -> list[str]:
    return [suite] if suite is not None else list_suites(root)


def task_row(task: TaskSpec) -> dict[str, object]:
    """The JSON-able summary of a task that `tasks list --json` prints, one per line."""
    return {
        "id": task.id,
        "suite": task.suite,
        "category": task.category,
        "repo": task.source.label,
        "commit": task.source.commit,
        "supports_cpu": task.supports_cpu,
        "supports_single_gpu": task.supports_single_gpu,
        "supports_multi_gpu": task.supports_multi_gpu,
        "gpus_needed": task.gpus_needed,
        "c0_baseline_total": task.c0_baseline_total,
    }


@app.command("list")
def list_(
    suite: str | None = typer.Option(None, "--suite", "-s", help=_SUITE_HELP),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per task per line."),
    root: Path | None = typer.Option(None, "--root", help=_ROOT_HELP),
) -> None:
    """List tasks with their source, stage applicability (cpu, 1gpu, multigpu) and C0 total."""
    tasks = [task for name in _suites(suite, root) for task in load_suite(name, root)]
    if as_json:
        for task in tasks:
            typer.echo(json.dumps(task_row(task)))
        return
    yes = {True: "yes", False: "-"}
    rows = [("id", "suite", "source", "cpu", "1gpu", "multigpu", "c0")]
    for task in tasks:
        multi = f"yes({task.stages.multi_gpu.ranks})" if task.supports_multi_gpu else "-"
        c0 = "?" if task.c0_baseline_total is None else str(task.c0_baseline_total)
        rows.append((task.id, task.suite, task.source.label, yes[task.supports_cpu],
                     yes[task.supports_single_gpu], multi, c0))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        typer.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())


@app.command("validate")
def validate(
    suite: str | None = typer.Option(None, "--suite", "-s", help=_SUITE_HELP),
    root: Path | None = typer.Option(None, "--root", help=_ROOT_HELP),
) -> None:
    """Load every task file of one suite or all suites; exit 2 naming the first invalid field."""
    names = _suites(suite, root)
    for name in names:
        typer.echo(f"{name}: {len(load_suite(name, root))} task(s) ok")
    if not names:
        typer.echo("no suites found")
