"""`reb-ray regrade RUN_DIR [--rerun-probes [--trials ID,...]]`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def regrade(
    run_dir: Path = typer.Argument(..., help="Output directory of a sweep (holds trials/ and stages/)."),
    sweep_id: Optional[str] = typer.Option(None, help="Only this sweep."),
    tasks_root: Optional[Path] = typer.Option(None, help="Directory holding suites (default: bundled)."),
    rerun_probes: bool = typer.Option(False, "--rerun-probes", help="Run today's probe phase again on each trial's kept environment image, on this node or with --address on the node that kept it (no agent), recorded as sweep <sweep>-reprobe; a trial whose image is gone says so."),
    trials: Optional[str] = typer.Option(None, help="With --rerun-probes: only these trial ids, comma-separated."),
    assets: Optional[Path] = typer.Option(None, help="With --rerun-probes: this node's read-only asset cache for the probes."),
    gpus: Optional[str] = typer.Option(None, help="With --rerun-probes: the physical GPU ids each sandbox gets, comma-separated (default: as many of this node's as the source attempt had)."),
    address: Optional[str] = typer.Option(None, help="With --rerun-probes: the Ray cluster (HOST:PORT, or auto) whose nodes kept the images; each attempt is re-probed on the node that ran it (default: this node's images only)."),
) -> None:
    """Recompute stage results and C5 from stored raw probe outputs; write them as a new sweep.
    With --rerun-probes, probe the kept environments themselves again instead."""
    from analysis.summary import format_summary, summarize
    from reb_ray.sweep.regrade import regrade as run_regrade
    from reb_ray.results.compact import compact_if_idle
    from reb_ray.results.parquet_sink import ParquetSink
    from reb_ray.results.read import read_trials

    from reb_ray.errors import RebRayError

    if not (run_dir / "trials").is_dir():
        raise RebRayError(f"{run_dir}: no trials/ dataset here (is it a sweep's --output directory?)")
    if not rerun_probes and any(v is not None for v in (trials, assets, gpus, address)):
        raise RebRayError("--trials, --assets, --gpus and --address go with --rerun-probes (an offline regrade reads every stored trial)")
    missing = 0
    if rerun_probes:
        outcomes, missing = _rerun_probes(run_dir, sweep_id, tasks_root, trials, assets, gpus, address)
    else:
        outcomes = run_regrade(run_dir, sweep_id, tasks_root, note=typer.echo)
    with ParquetSink(run_dir) as sink:
        for outcome in outcomes:
            sink.write([outcome.trial], outcome.stages)
    new_ids = sorted({o.trial["sweep_id"] for o in outcomes})
    for new_id in new_ids:
        compact_if_idle(run_dir, new_id)
    typer.echo(f"{'re-probed' if rerun_probes else 're-graded'} {len(outcomes)} trial(s) into sweep(s) {', '.join(new_ids) or '-'}")
    for new_id in new_ids:
        typer.echo(format_summary(summarize(read_trials(run_dir, new_id))))
    if rerun_probes:  # exit codes: reb_ray.cli.exits
        from reb_ray.cli.exits import exit_code, incomplete_line

        undone = {"no kept image": missing,
                  "probe phase not scored": sum(o.trial.get("status") != "scored" for o in outcomes)}
        if (last := incomplete_line(undone)) is not None:
            typer.echo(last)
        if code := exit_code(undone=sum(undone.values())):
            raise typer.Exit(code)


def _rerun_probes(run_dir: Path, sweep_id, tasks_root, trials, assets, gpus, address) -> list:
    """`reb_ray.sweep.reprobe.reprobe`, a line per trial as it ends, then the count of those
    without an image; returns the new rows' outcomes and that count. `address`: the cluster whose nodes are
    asked for the images kept on them (reb_ray.orchestrators.on_node)."""
    from reb_ray.errors import RebRayError
    from reb_ray.sweep.reprobe import reprobe

    if assets is not None and not assets.is_dir():
        raise RebRayError(f"--assets {assets}: not a directory")
    wanted = [t.strip() for t in trials.split(",") if t.strip()] if trials else None
    if trials is not None and not wanted:
        raise RebRayError(f"--trials {trials!r}: no trial id given")
    ids = [g.strip() for g in gpus.split(",") if g.strip()] if gpus is not None else None
    run_on = None
    if address is not None:
        from reb_ray.orchestrators.on_node import NodeRunner

        run_on = NodeRunner(address)
    result = reprobe(run_dir, sweep_id, wanted, tasks_root, assets.resolve() if assets else None, ids, progress=typer.echo,
                     run_on=run_on)
    if result.missing:
        where = "on the nodes that ran them" if address is not None else "on this node"
        typer.echo(f"{len(result.missing)} trial(s) not re-probed: no kept image {where}")
    return result.outcomes, len(result.missing)
