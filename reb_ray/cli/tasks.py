"""`reb-ray tasks list|validate|c0-baseline|reference|verify`: inspect and check task suites, store and check their reference environments."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from reb_ray.cli.aliases import either, old_name
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the task model (pydantic) loads when a command runs, not for --help (reb_ray.cli)
    from reb_ray.models.task import TaskSpec


def list_suites(root: Path | None = None) -> list[str]:
    """reb_ray.suite.load.list_suites, imported when a command runs."""
    from reb_ray.suite.load import list_suites as run

    return run(root)


def load_suite(*args, **kwargs):
    """reb_ray.suite.load.load_suite, imported when a command runs."""
    from reb_ray.suite.load import load_suite as run

    return run(*args, **kwargs)

app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="List and validate task suites; store and check their reference environments.")

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
        "cuda_check": task.stages.cuda.applicable,
        "gpus_needed": task.gpus_needed,
        "c0_baseline_total": task.c0_baseline_total,
        "deviations": deviations(task),
    }


@app.command("list")
def list_(
    suite: str | None = typer.Option(None, "--suite", "-s", help=_SUITE_HELP),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per task per line."),
    tasks_root: Path | None = typer.Option(None, "--tasks-root", help=_ROOT_HELP),
    old_root: Path | None = old_name("--root", "--tasks-root"),
) -> None:
    """List tasks with their source, stage applicability (cpu, c2 the CUDA check, 1gpu, multigpu), C0 total, and
    the stages that deliberately differ from the paper's release (explained below the table)."""
    root = either(tasks_root, old_root, "--root", "--tasks-root")
    tasks = [task for name in _suites(suite, root) for task in load_suite(name, root)]
    if as_json:
        for task in tasks:
            typer.echo(json.dumps(task_row(task)))
        return
    yes = {True: "yes", False: "-"}
    rows = [("id", "suite", "source", "cpu", "c2", "1gpu", "multigpu", "c0", "deviation")]
    notes = []
    for task in tasks:
        multi = f"yes({task.stages.multi_gpu.ranks})" if task.supports_multi_gpu else "-"
        c0 = "?" if task.c0_baseline_total is None else str(task.c0_baseline_total)
        differs = deviations(task)
        rows.append((task.id, task.suite, task.source.label, yes[task.supports_cpu], yes[task.stages.cuda.applicable],
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
    tasks_root: Path | None = typer.Option(None, "--tasks-root", help=_ROOT_HELP),
    old_root: Path | None = old_name("--root", "--tasks-root"),
) -> None:
    """Load every task file of one suite or all suites; exit 2 naming the first invalid field.
    Then check that no stage is impossible by construction (reb_ray.models.feasibility):
    each one that is is named on a line of its own, and the exit code is 1."""
    root = either(tasks_root, old_root, "--root", "--tasks-root")
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
    tasks_root: Path | None = typer.Option(None, "--tasks-root", help=_ROOT_HELP),
    old_root: Path | None = old_name("--root", "--tasks-root"),
) -> None:
    """Recompute each task's C0 denominator from its pinned commit and compare it with the task's
    canonical `c0_baseline_total` (which stays the scoring denominator).

    Per task: the paper's rule (every distinct top-level import), the third-party-only count an
    agent must install, and the imports only a runtime sys.path edit resolves (pyright cannot
    follow them, so they stay missing for every agent). Tasks
    without a mirror are listed as such; exit 1 if any task could not be scanned.
    """
    root = either(tasks_root, old_root, "--root", "--tasks-root")
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


@app.command("reference")
def reference(
    output: Path = typer.Argument(..., help="Output directory of sweeps whose successes were verified (--verify-exports)."),
    suite: str | None = typer.Option(None, "--suite", "-s", help="Only this suite's tasks (default: every suite in the output)."),
    tasks_root: Path | None = typer.Option(None, "--tasks-root", help=_ROOT_HELP),
    old_root: Path | None = old_name("--root", "--tasks-root"),
) -> None:
    """Store, for each task, the verified environment (`reproducible: yes`) that reached the
    highest stage (then the most stages, then the smallest) as its reference recipe:
    <task>/reference/ (Dockerfile, locks, manifest, report, reference.toml with the stages it
    passed and the hardware it ran on). Tasks with no verified environment are left as they are."""
    root = either(tasks_root, old_root, "--root", "--tasks-root")
    from reb_ray.sweep.references import pick_references, store_reference

    chosen = pick_references(output, suite)
    if not chosen:
        typer.echo(f"{output}: no environment verified as reproducible" + (f" for suite {suite!r}" if suite else ""))
        raise typer.Exit(1)
    suites: dict[str, dict[str, TaskSpec]] = {}
    for task_id, cand in sorted(chosen.items()):
        name = cand.row["suite"]
        if name not in suites:
            suites[name] = {t.id: t for t in load_suite(name, root)}
        task = suites[name].get(task_id)
        if task is None:
            typer.echo(f"{name}/{task_id}: no such task in the tasks directory any more; skipped")
            continue
        dest = store_reference(cand, task.task_dir)
        size = sum(p.stat().st_size for p in dest.rglob("*") if p.is_file())
        typer.echo(f"{name}/{task_id}: {cand.row['trial_id']} attempt {cand.row['attempt']} (sweep {cand.row['sweep_id']}), "
                   f"passed {' '.join(cand.passed) or 'nothing'}, env {_size(cand.row.get('env_size_bytes'))} -> "
                   f"{dest} ({size / 1e3:.1f} kB)")


def _size(value: int | None) -> str:
    return "size unknown" if value is None else f"{value / 1e6:.1f} MB"


@app.command("verify")
def verify(
    suite: str = typer.Option("demo", "--suite", "-s", help="The suite to check (default demo)."),
    tasks: str | None = typer.Option(None, "--tasks", help="Pattern(s) on task ids, comma-separated."),
    tasks_root: Path | None = typer.Option(None, "--tasks-root", help=_ROOT_HELP),
    old_root: Path | None = old_name("--root", "--tasks-root"),
    output: Path | None = typer.Option(None, "--output", help="Keep the sweep's results here (default: a temporary directory)."),
    wheelhouse: list[Path] = typer.Option([], "--wheelhouse", help="Wheel directory visible to sandboxes as find-links (repeatable)."),
    repo_mirror: list[Path] = typer.Option([], "--repo-mirror", help="Local mirror directory of repositories (repeatable)."),
    assets: Path | None = typer.Option(None, "--assets", help="Read-only asset cache for the probes."),
    max_concurrent: int | None = typer.Option(None, "--max-concurrent", help="Trials running at once (default: cluster CPUs)."),
    address: str | None = typer.Option(None, "--address", help="Ray cluster address to join (default: a local Ray)."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
) -> None:
    """Suite health: sweep the `reference` agent (rebuilds each task's stored recipe) and `noop`
    on every task that has a reference. The reference must pass its recorded stages again and
    noop must pass no environment stage (C0..C4) that applies; prints a table (task, reference
    stages, reference, noop, verdict); exits 1 on any broken task, else 3 when a task was left
    unmeasured by the infrastructure (reb_ray.cli.exits)."""
    root = either(tasks_root, old_root, "--root", "--tasks-root")
    import tempfile
    import time

    from reb_ray.models.sweep import SweepConfig
    from reb_ray.sweep.task_health import health_table, verify_tasks

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="reb-ray-tasks-verify-") as tmp:
        fields: dict = {"suite": suite, "tasks": tasks, "tasks_root": root, "output": output or Path(tmp),
                        "repo_mirrors": repo_mirror, "assets_dir": assets, "max_concurrent": max_concurrent,
                        "address": address}
        if wheelhouse:
            fields["wheelhouses"] = wheelhouse
        rows, sweep_id = verify_tasks(SweepConfig(**fields), show_progress=not quiet)
    typer.echo(health_table(rows))
    failed = [h.task_id for h in rows if h.failed]
    typer.echo(f"{suite}: {sum(h.verdict == 'ok' for h in rows)} ok, {len(failed)} broken or unmeasured, "
               f"{sum(h.verdict == 'no reference' for h in rows)} without a reference; sweep {sweep_id}, "
               f"{time.monotonic() - started:.1f} s" + (f"; results in {output}" if output else ""))
    from reb_ray.cli.exits import exit_code, incomplete_line

    # A broken task is the check failing (1); a task left `unknown` by the infrastructure is undone (3).
    unmeasured = sum(h.verdict == "unknown" for h in rows)
    if (last := incomplete_line({"not measured: a trial was not scored": unmeasured}, noun="task")) is not None:
        typer.echo(last)
    if code := exit_code(failed=sum(h.verdict == "broken" for h in rows), undone=unmeasured):
        raise typer.Exit(code)


@app.command("export")
def export(
    out: Path = typer.Argument(..., help="Directory to write the tasks into, one <task-id>/ each."),
    fmt: str = typer.Option("harbor", "--format", help="The task format to write (harbor: task.toml, instruction.md, environment/, tests/, solution/)."),
    suite: str = typer.Option("demo", "--suite", "-s", help="The suite to export."),
    tasks: str | None = typer.Option(None, "--tasks", help="Pattern(s) on task ids, comma-separated."),
    tasks_root: Path | None = typer.Option(None, "--tasks-root", help=_ROOT_HELP),
    base_image: str | None = typer.Option(None, "--base-image", help="The environment's FROM image; Harbor builds with the local Docker, so one it has or can pull (default: the reb-ray sandbox image)."),
    repo_mirror: list[Path] = typer.Option([], "--repo-mirror", help="Local mirror directory of repositories (repeatable); a git task without one is cloned by the Dockerfile."),
    ca_bundle: Path | None = typer.Option(None, "--ca-bundle", help="CA bundle the oracle solution's installs trust, shipped in solution/certs (default: the sandbox's, the host's bundle when it exists)."),
) -> None:
    """Write a suite's tasks as Harbor tasks (docs/harbor.md): the repository at its pinned
    commit in environment/, the agent prompt as instruction.md, reb-ray's hidden probes as
    tests/test.sh (one metric per stage and a reward in reward.json), the reference recipe as
    solution/solve.sh where the task has one, GPUs and time limits in task.toml."""
    from reb_ray.harbor.export import export_task
    from reb_ray.probing.toolbox import toolbox_tar
    from reb_ray.sandbox.docker.image import image_tag
    from reb_ray.suite.load import select_tasks

    if fmt != "harbor":
        typer.echo(f"--format {fmt}: unknown task format; valid: harbor", err=True)
        raise typer.Exit(2)
    chosen = select_tasks(load_suite(suite, tasks_root), tasks)
    from reb_ray.models.sweep import SandboxSettings

    image = base_image or image_tag()
    ca_bundle = ca_bundle or SandboxSettings().ca_bundle
    toolbox = toolbox_tar()
    out.mkdir(parents=True, exist_ok=True)
    for task in chosen:
        done = export_task(task, out, image, toolbox, mirrors=repo_mirror, ca_bundle=ca_bundle)
        typer.echo(f"{suite}/{task.id} -> {done.path} (gpus {done.gpus}, "
                   f"{'oracle solution' if done.has_solution else 'no reference: no solution'})")
    typer.echo(f"{len(chosen)} task(s) written as Harbor tasks under {out} (FROM {image})")


@app.command("run-harbor")
def run_harbor(
    path: Path = typer.Argument(..., help="A Harbor task directory, or a directory of them."),
    agent: list[str] = typer.Option(["oracle"], "--agent", "-a", help="oracle (runs solution/solve.sh) or noop; repeatable."),
    tasks: str | None = typer.Option(None, "--tasks", help="Pattern(s) on task names, comma-separated."),
    output: Path = typer.Option(Path("harbor-runs"), "--output", "-o", help="Where the rows (rows.jsonl) and each attempt's logs go."),
    max_concurrent: int = typer.Option(2, "--max-concurrent", help="Trials running at once."),
    image_map: list[str] = typer.Option([], "--image-map", help="FROM-IMAGE=LOCAL-IMAGE, or REGISTRY/=MIRROR/ (repeatable): what a Dockerfile's base image is built from here."),
    gpu_ids: str = typer.Option("", "--gpu-ids", help="This node's GPUs to place trials on, comma-separated physical ids (default: none)."),
) -> None:
    """Run Harbor tasks in reb-ray sandboxes (docs/harbor.md): each task's image built from its
    Dockerfile once per digest, the agent phase, then tests/ copied in and test.sh run the Harbor
    way, the reward read from /logs/verifier/reward.json or reward.txt. Writes one row per trial to
    OUTPUT/rows.jsonl, keeps the verifier's output per trial, prints each reward and the mean
    reward per agent with a 95% interval beside time. Exit 3 when a trial was left without a
    score by the infrastructure."""
    import fnmatch
    import time

    from analysis.estimators import bootstrap_mean
    from reb_ray.harbor.images import parse_image_map
    from reb_ray.harbor.task import find_harbor_tasks
    from reb_ray.harbor.run import log_dir_for, run_all
    from reb_ray.harbor.trial import AGENTS, run_harbor_trial
    from reb_ray.sandbox.docker.image import image_tag

    init_image = image_tag()
    try:
        mapping = parse_image_map(image_map)
    except ValueError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(2)
    for name in agent:
        if name not in AGENTS:
            typer.echo(f"--agent {name}: a Harbor task runs here with {', '.join(AGENTS)}", err=True)
            raise typer.Exit(2)
    found = find_harbor_tasks(path)
    patterns = [p.strip() for p in (tasks or "").split(",") if p.strip()]
    chosen = [t for t in found if not patterns or any(fnmatch.fnmatchcase(t.id, p) for p in patterns)]
    output.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    gpus = [g.strip() for g in gpu_ids.split(",") if g.strip()]
    outcomes = run_all(chosen, agent, lambda task, name, held: run_harbor_trial(
        task, name, log_dir_for(output, name, task), init_image, image_map=mapping, gpus=held),
        gpus, cpu_slots=max_concurrent)
    wall = time.monotonic() - started
    with open(output / "rows.jsonl", "a", encoding="utf-8") as fh:
        for outcome in outcomes:
            fh.write(json.dumps(outcome.row()) + "\n")
    for outcome in outcomes:
        reward = "null" if outcome.reward is None else f"{outcome.reward:g}"
        extra = "" if outcome.reason is None else f"  [{outcome.owner}: {outcome.category}: {outcome.reason}]"
        typer.echo(f"{outcome.agent}  {outcome.task_id}  reward {reward}  {outcome.wall_s or 0:.1f} s{extra}")
    for name in agent:
        mine = [o for o in outcomes if o.agent == name]
        rewards = [o.reward for o in mine if o.reward is not None]
        interval = bootstrap_mean(rewards) if rewards else None
        mean = f"{sum(rewards) / len(rewards):.3f}" if rewards else "null"
        ci = f" [{interval[0]:.3f}, {interval[1]:.3f}]" if interval else ""
        typer.echo(f"{name}: mean reward {mean}{ci} over {len(rewards)} of {len(mine)} trial(s); "
                   f"{sum(o.wall_s or 0 for o in mine):.1f} s of trials; cost 0 (no model)")
    typer.echo(f"{len(outcomes)} trial(s) in {wall:.1f} s at {max_concurrent} at once; rows in {output / 'rows.jsonl'}")
    if any(o.status != "scored" for o in outcomes):
        raise typer.Exit(3)
