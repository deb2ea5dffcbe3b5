"""`reb-ray tasks list|validate`: inspect and check task suites."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from reb_ray.models.task import TaskSpec

from reb_ray.suite.load import list_suites, load_suite

app = typer.Typer(no_args_is_help=True, help="List and validate task suites.")

_SUITE_HELP = "Only this suite (default: every suite)."
_ROOT_HELP = "Tasks directory holding <suite>/<task-id>/task.toml (default: the bundled tasks)."


def _suites(suite: str | None, root: Path | None) -> list[str]:
    return [suite] if suite is not None else list_suites(root)


_STAGE_LABELS = {"cpu": "cpu", "single_gpu": "1gpu", "multi_gpu": "multigpu"}


def deviations(task: TaskSpec) -> dict[str, str]:
    """{stage name (cpu, single_gpu, multi_gpu): how it deliberately differs from the release}."""
    return task.deviations


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
        "deviations": deviations(task),
    }


@app.command("list")
def list_(
    suite: str | None = typer.Option(None, "--suite", "-s", help=_SUITE_HELP),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per task per line."),
    root: Path | None = typer.Option(None, "--root", help=_ROOT_HELP),
) -> None:
    """List tasks with their source, stage applicability (cpu, 1gpu, multigpu), C0 total, and
    the stages that deliberately differ from the paper's release (explained below the table)."""
    tasks = [task for name in _suites(suite, root) for task in load_suite(name, root)]
    if as_json:
        for task in tasks:
            typer.echo(json.dumps(task_row(task)))
        return
    yes = {True: "yes", False: "-"}
    rows = [("id", "suite", "source", "cpu", "1gpu", "multigpu", "c0", "deviation")]
    notes = []
    for task in tasks:
        multi = f"yes({task.stages.multi_gpu.ranks})" if task.supports_multi_gpu else "-"
        c0 = "?" if task.c0_baseline_total is None else str(task.c0_baseline_total)
        differs = deviations(task)
        rows.append((task.id, task.suite, task.source.label, yes[task.supports_cpu],
                     yes[task.supports_single_gpu], multi, c0, ",".join(_STAGE_LABELS[n] for n in differs) or "-"))
        notes += [f"  {task.id} {_STAGE_LABELS[name]}: {text}" for name, text in differs.items()]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        typer.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    if notes:
        typer.echo("\ndeviations from the paper's release:")
        typer.echo("\n".join(notes))


@app.command("validate")
def validate(
    suite: str | None = typer.Option(None, "--suite", "-s", help=_SUITE_HELP),
    root: Path | None = typer.Option(None, "--root", help=_ROOT_HELP),
) -> None:
    """Load every task file of one suite or all suites; exit 2 naming the first invalid field.
    Then check that no stage is impossible by construction (reb_ray/models/feasibility.py):
    each one that is is named on a line of its own, and the exit code is 1."""
    from reb_ray.models.feasibility import impossible_stages

    names = _suites(suite, root)
    broken = []
    for name in names:
        tasks = load_suite(name, root)
        found = [f.line(task.id) for task in tasks for f in impossible_stages(task)]
        broken += found
        typer.echo(f"{name}: {len(tasks)} task(s) ok" if not found else
                   f"{name}: {len(tasks)} task(s) loaded, {len(found)} stage(s) impossible by construction")
    if not names:
        typer.echo("no suites found")
    for line in broken:
        typer.echo(f"impossible: {line}", err=True)
    if broken:
        raise typer.Exit(1)


@app.command("c0-baseline")
def c0_baseline(
    repo_mirror: list[Path] = typer.Option(..., "--repo-mirror", help="Local mirror directory (repeatable), as for sweeps."),
    suite: str = typer.Option("researchenvbench", "--suite", "-s", help="Suite whose git tasks to scan."),
    tasks: str | None = typer.Option(None, "--tasks", help="Pattern(s) on task ids."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per task per line."),
    root: Path | None = typer.Option(None, "--root", help=_ROOT_HELP),
) -> None:
    """Recompute each task's C0 denominator from its pinned commit and compare it with the task's
    canonical `c0_baseline_total` (which stays the scoring denominator).

    Per task: the paper's rule (every distinct top-level import), the third-party-only count an
    agent must install, and the imports only a runtime sys.path edit resolves (pyright cannot
    follow them, so they stay missing for every agent). Tasks
    without a mirror are listed as such; exit 1 if any task could not be scanned.
    """
    from reb_ray.suite.c0_baseline import baseline_for_commit
    from reb_ray.suite.load import select_tasks
    from reb_ray.suite.placement import find_mirror

    failed = 0
    for task in select_tasks(load_suite(suite, root), tasks):
        row: dict[str, object] = {"id": task.id, "canonical": task.c0_baseline_total}
        mirror = find_mirror(repo_mirror, task.source.owner_repo) if task.source.owner_repo else None
        try:
            if mirror is None:
                raise RuntimeError("no git source or no mirror of " + str(task.source.label))
            paper = baseline_for_commit(mirror, task.source.commit)
            strict = baseline_for_commit(mirror, task.source.commit, include_stdlib=False, include_local=False)
            row.update(scanned=paper["total"], delta=None if task.c0_baseline_total is None else paper["total"] - task.c0_baseline_total,
                       third_party=strict["total"], runtime_path=paper["runtime_path"], syntax_errors=paper["syntax_errors"])
        except RuntimeError as exc:
            failed += 1
            row["error"] = str(exc)
        if as_json:
            typer.echo(json.dumps(row))
        elif "error" in row:
            typer.echo(f"{task.id}: {row['error']}")
        else:
            same = "same" if row["delta"] == 0 else f"delta {row['delta']:+d}"
            extra = f", runtime sys.path only: {', '.join(row['runtime_path'])}" if row["runtime_path"] else ""  # type: ignore[arg-type]
            typer.echo(f"{task.id}: canonical {row['canonical']}, scanned {row['scanned']} ({same}); "
                       f"third-party {row['third_party']}{extra}")
    if failed:
        raise typer.Exit(1)
