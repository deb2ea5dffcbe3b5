"""Re-probing stored environments: the current probe phase on each kept image, with no agent.

`reprobe(run_dir, ...)` takes the current scored attempt of every selected trial (the rule of
`latest_attempts`), and when the environment the agent built is kept as an image on this node
(`--keep-environments`, reb_ray.environment.keep) it starts a sandbox from that image with the
sandbox config a probe phase gets (`prepare.sandbox_config`: the sweep's limits, its network
policy through `TrialEgress`, the assets mount), and runs today's probe phase
(`run_probe_phase`) on it: the report is the attempt's stored one (the `report` stage row's raw
JSON, parsed under today's report rules), the repository is the one in the image at the same
path (tracked files were put back to the pinned commit before the image was committed), and no
agent runs. So a fixed or new probe reaches the environments themselves, not only their stored
outputs (`reb-ray regrade`), and no agent is paid for again.

The new verdicts are a new grading of the same attempt: rows under the sweep id
`<sweep_id>-reprobe` (like regrade's `<sweep_id>-regrade`), with the source's trial id and
attempt number, the agent-phase rows (`agent`, `report`) and columns copied from the source,
every probe column measured afresh, `reused_from` naming the source sweep (so the spend is not
counted twice, and resume never reuses such a row) and `probe_toolbox` the 16-hex key of the
toolbox that graded it (`toolbox_key`). Re-probing again appends another grading of the same
attempt; readers take the latest (`latest_attempts` keeps the row written last among equal
attempts). The settings that decide a score are the source sweep's (its stored identity, then
the row's own limit columns); the asset cache is the one given here (it is this node's).

GPUs: the sandbox gets as many of this node's GPUs as the source attempt had (`gpus`
overrides), so the GPU stages are measured on the same count; fewer is the hardware's failure,
as in a sweep. Each re-probed row carries this node's hardware fingerprint.

Nodes: a kept image lives in the Docker of the node that ran the attempt (the row's `node`).
Given a cluster (`run_on`, `reb-ray regrade --address`), an attempt kept on another node is
re-probed there, with that node's GPUs, and its logs come back here; without one, only this
node's images are reached. A trial whose environment was not kept, or whose kept image is gone
(removed by the disk budget or by hand), or whose node is not reachable, is not re-probed: it
gets one line saying so and is counted (`ReprobeResult.missing`), never an error for the whole
run. Every sandbox
is removed on every path (`_close`), and the egress proxy and the host workspace with it.
"""

from __future__ import annotations

import json
import shutil
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from reb_ray.errors import ImageMissing, InfraError, RebRayError
from reb_ray.grading.unmeasured import PROBE_STAGES, STAGE_COLUMNS
from reb_ray.grading.verdict import differences
from reb_ray.grading.vocabulary import Stage
from reb_ray.models.report import parse_report
from reb_ray.models.sweep import HARBOR_PREFIX, SweepConfig, TrialSpec
from reb_ray.models.task import TaskSpec
from reb_ray.results.read import GRADING_SUFFIXES, REPROBE_SUFFIX, latest_attempts, read_stages, read_trials
from reb_ray.sandbox.scratch import make_scratch
from reb_ray.suite.load import load_suite
from reb_ray.sweep.identity import SCORED_SETTINGS, identity_path
from reb_ray.trial.result import HardwareFingerprint, StageRow

if TYPE_CHECKING:  # the sandbox and trial modules load the Docker SDK: imported where a re-probe runs
    from reb_ray.trial.egress import TrialEgress
    from reb_ray.trial.record import TrialOutcome, TrialRecorder

#: Stage rows the probe phase writes (the rest, `agent` and `report`, are copied from the source).
PROBE_ROWS = (*PROBE_STAGES, "startup")
#: Trials-row columns the probe phase sets: nulled before it runs, so none is left from the source.
PROBE_COLUMNS = (*(c for columns in STAGE_COLUMNS.values() for c in columns),
                 "c1_witness", "c3_witness", "c4_witness", "python_path_kind", "startup_hooks", "suspicious_actions",
                 "gpus_assigned", "probe_wall_time_s", "pip_cache_filled", "probe_image_commit_s", "probe_image_bytes",
                 "probe_gpu_wait_s", "status", "failure_owner", "failure_category", "failure_reason",
                 "stages_missing_assets", "network_denied_count", "network_log_path", "sandbox_network",
                 "network_host_guard")
#: Trials-row columns a re-probe's row takes from its own attempt; the rest are the source's.
REPROBED_COLUMNS = (*PROBE_COLUMNS, *HardwareFingerprint.column_names(), "sweep_id", "node", "started_at",
                    "finished_at", "probe_toolbox", "rerun", "sandbox_limits_enforced", "report_status",
                    "report_python_path")
#: The row's own record of the sandbox limits, over the stored identity's (SweepConfig field: row column).
_ROW_LIMITS = {"pids_limit": "sandbox_pids_limit", "memory_bytes": "sandbox_memory_bytes",
               "disk_quota_bytes": "sandbox_disk_quota_bytes", "shm_size_bytes": "sandbox_shm_bytes",
               "network_policy": "network_policy", "sandbox": "sandbox_provider"}


@dataclass
class Reprobed:
    """One re-probed attempt: its new rows, the source's row, and the seconds it took (`open_s`:
    the sandbox from the kept image started; `probe_s`: the probe phase, as the row's
    probe_wall_time_s)."""

    outcome: TrialOutcome
    source: dict
    source_toolbox: str | None
    open_s: float | None
    probe_s: float | None


@dataclass
class ReprobeResult:
    """What a re-probe did: the attempts re-probed, and those it could not re-probe with why
    (row, one line): the environment not kept, or its image gone from this node."""

    reprobed: list[Reprobed] = field(default_factory=list)
    missing: list[tuple[dict, str]] = field(default_factory=list)

    @property
    def outcomes(self) -> list[TrialOutcome]:
        return [r.outcome for r in self.reprobed]


def source_trials(run_dir: Path, sweep_id: str | None = None, trial_ids: list[str] | None = None) -> list[dict]:
    """The current scored attempts to re-probe: of `sweep_id` (else of every sweep but the
    gradings, `-regrade` and `-reprobe`), of `trial_ids` only when given. Raises RebRayError
    naming a trial id that has no scored attempt there, or when nothing is left."""
    rows = [t for t in latest_attempts(read_trials(run_dir, sweep_id)).to_pylist()
            if t["status"] == "scored" and (sweep_id or not t["sweep_id"].endswith(GRADING_SUFFIXES))]
    if trial_ids:
        unknown = sorted(set(trial_ids) - {r["trial_id"] for r in rows})
        if unknown:
            raise RebRayError(f"{run_dir}: no scored trial {', '.join(map(repr, unknown))}"
                              f"{f' in sweep {sweep_id!r}' if sweep_id else ''} to re-probe")
        rows = [r for r in rows if r["trial_id"] in set(trial_ids)]
    if not rows:
        raise RebRayError(f"{run_dir}: no scored trials of {f'sweep {sweep_id!r}' if sweep_id else 'any sweep'} to re-probe")
    return sorted(rows, key=lambda r: (r["sweep_id"], r["trial_id"]))


#: Why a Harbor task's trial is neither re-graded nor re-probed (`split_harbor`).
HARBOR_WHY = ("a Harbor task's score is its verifier's reward, which only running the task again gives "
              "(reb-ray sweep --suite harbor:PATH), and no environment of it is kept")


def split_harbor(rows: list[dict], run_dir: Path, verb: str) -> tuple[list[dict], list[dict]]:
    """(`rows` of reb-ray's own tasks, `rows` of Harbor tasks). Nothing stored of a Harbor
    trial can be re-graded or re-probed (`HARBOR_WHY`), so the caller leaves those out and says
    so. Raises RebRayError naming the sweeps when every row is a Harbor trial (`verb`: what
    could not be done, e.g. "re-graded")."""
    harbor = [r for r in rows if str(r.get("suite") or "").startswith(HARBOR_PREFIX)]
    if harbor and len(harbor) == len(rows):
        sweeps = ", ".join(sorted({r["sweep_id"] for r in harbor}))
        raise RebRayError(f"{run_dir}: sweep {sweeps} holds only trials of Harbor tasks, which cannot be {verb}: "
                          f"{HARBOR_WHY}")
    return [r for r in rows if not str(r.get("suite") or "").startswith(HARBOR_PREFIX)], harbor


def stored_identity(run_dir: Path, sweep_id: str) -> dict:
    """The sweep's stored scoring identity (reb_ray.sweep.identity), {} when it has none or it is unreadable."""
    try:
        return json.loads(identity_path(run_dir, sweep_id).read_text())["identity"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def reprobe_config(source: dict, identity: dict, run_dir: Path, assets_dir: Path | None) -> SweepConfig:
    """The sweep config the re-probe runs under: the defaults, then the source sweep's scored
    settings from its identity, then the limits the source row records; `assets_dir` is this
    node's asset cache; nothing is kept (the environment is kept already). The agent is not
    named: it does not run, and the source row names it."""
    values: dict = {k: identity[k] for k in SCORED_SETTINGS if identity.get(k) is not None}
    values.update({k: source[c] for k, c in _ROW_LIMITS.items() if source.get(c) is not None})
    return SweepConfig(suite=source["suite"], output=run_dir, assets_dir=assets_dir, keep_environments="none", **values)


def node_gpus() -> list[str]:
    """This node's GPU indices as nvidia-smi lists them ([] without nvidia-smi)."""
    import subprocess

    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip().isdigit()] if out.returncode == 0 else []


def _no_image(source: dict) -> str | None:
    """Why the source attempt has no kept image to start from (one line), else None."""
    from reb_ray.sandbox import capabilities_of

    if not capabilities_of(source.get("sandbox_provider") or "docker").commit:
        return f"its sandbox provider {source.get('sandbox_provider')!r} keeps no images"
    if not source.get("env_kept") or not source.get("env_image_id"):
        return (f"its environment was not kept (env_kept {source.get('env_kept')}, policy "
                f"{source.get('env_keep_policy') or '-'}{'; ' + source['env_keep_error'] if source.get('env_keep_error') else ''})")
    return None


def reprobe_trial(source: dict, stages: dict[str, dict], task: TaskSpec, config: SweepConfig, gpus: list[str],
                  toolbox: str, ship: bool = False) -> tuple[TrialOutcome, float | None]:
    """Re-probe one attempt from its kept image (module docstring): (its new rows, the seconds
    the sandbox took to start). Raises ImageMissing when the image is not on this node; any
    other failure becomes an infra_error row, as in a trial. `ship`: the logs come back in the
    outcome's `artifacts` (the caller stores them) instead of being written here."""
    from reb_ray.environment.fingerprint import fingerprint
    from reb_ray.redact import Redactor
    from reb_ray.sandbox import open_sandbox
    from reb_ray.trial import artifacts
    from reb_ray.trial.artifacts import TrialArtifacts
    from reb_ray.trial.egress import TrialEgress
    from reb_ray.trial.prepare import sandbox_config
    from reb_ray.trial.probe_phase import run_probe_phase
    from reb_ray.trial.record import TrialOutcome, TrialRecorder

    new_sweep = f"{source['sweep_id']}{REPROBE_SUFFIX}"
    spec = TrialSpec(sweep_id=new_sweep, agent=source["agent"], task=task, trial_index=source["trial_index"],
                     attempt=source["attempt"], config=config, image=source["env_image_id"])
    rec = TrialRecorder(spec)  # this node, this sweep id, started now
    result = rec.result
    result.identity.rerun = False
    result.hardware.set(**fingerprint(config.sandbox.provider))
    result.probe.probe_toolbox = toolbox  # the probe phase names it again once it installs the toolbox
    # What the probe phase reads of the attempt, and what the re-probe may measure again, as the source recorded it.
    result.setup.repo_commit = source.get("repo_commit")
    result.setup.sandbox_limits_enforced = source.get("sandbox_limits_enforced")
    result.between.set(**{c: source.get(c) for c in ("report_status", "report_python_path", "repo_modified_files")})
    rec.stages = [StageRow(**dict(s, sweep_id=new_sweep)) for name, s in stages.items() if name not in PROBE_ROWS]
    startup = json.loads((stages.get("startup") or {}).get("raw") or "{}")
    rec.trajectory_hits = list(startup.get("trajectory_hits") or [])
    report = _report(rec, stages.get("report"))
    redactor = Redactor([])
    staging = make_scratch("reb-ray-reprobe-")
    rec.artifacts = TrialArtifacts(staging, new_sweep, spec.trial_id, spec.attempt, redactor)
    sandbox_cfg, _ = sandbox_config(spec, gpus)
    egress, sandbox, open_s = TrialEgress(config), None, None
    try:
        started = time.monotonic()
        sandbox = open_sandbox(config.sandbox.provider, egress.open(sandbox_cfg), trusted=False, allow_unsafe=False)
        egress.attach(sandbox)
        open_s = time.monotonic() - started
        result.setup.sandbox_limits_enforced = sandbox.capabilities.enforces_limits
        repo_dir = f"{sandbox.workdir}/repo"
        if not sandbox.exec(["test", "-d", f"{repo_dir}/.git"], timeout=60).ok:
            raise InfraError("infra_sandbox", f"the kept image holds no repository at {repo_dir}")
        probe_t0 = time.monotonic()
        run_probe_phase(rec, sandbox, spec, repo_dir, report, gpus)
        result.probe.probe_wall_time_s = time.monotonic() - probe_t0
        rec.settle()
    except ImageMissing:
        _close(rec, sandbox, egress, staging)
        raise
    except InfraError as exc:
        rec.infra(exc.category, str(exc))
    except RebRayError as exc:
        rec.infra("infra_sandbox", str(exc))
    except Exception as exc:  # noqa: BLE001 - a harness bug is never the agent's grade
        rec.infra("infra_harness", f"{type(exc).__name__}: {exc}")
    _close(rec, sandbox, egress, None)
    outcome = rec.outcome(redactor)
    outcome.trial = reprobe_row(source, outcome.trial)
    artifacts.deliver(outcome, staging, config.output.dir.resolve(), ship)
    return outcome, open_s


def reprobe_there(source: dict, stages: dict[str, dict], task: TaskSpec, config: SweepConfig,
                  gpus: list[str] | None, toolbox: str) -> tuple[TrialOutcome, float | None] | None:
    """`reprobe_trial` on the node that kept the image, called there (`run_on`): its own GPUs
    when `gpus` is None, its logs shipped back. None when the image is gone from that node too."""
    try:
        return reprobe_trial(source, stages, task, config, gpus_for(source, gpus, node_gpus()), toolbox, ship=True)
    except ImageMissing:
        return None


def gpus_for(source: dict, gpus: list[str] | None, node_gpu_ids: list[str]) -> list[str]:
    """The physical GPU ids a re-probe of `source` gets: `gpus` when the user named them, else as
    many of the node's (`node_gpu_ids`, in order) as the source attempt was given, so each stage
    sees the GPU count it was graded with."""
    return gpus if gpus is not None else node_gpu_ids[:source.get("gpus_assigned") or 0]


def reprobe_row(source: dict, fresh: dict) -> dict:
    """The re-probe's trials row: the `source` row, with `REPROBED_COLUMNS` from the re-probe's
    own row `fresh` (its probe columns, settlement and network measured afresh, this node's
    fingerprint, its sweep id and times) and `reused_from` naming the source sweep. A column
    `fresh` lacks (a stage no verdict graded) is null, never the source's."""
    return {**source, **{c: fresh.get(c) for c in REPROBED_COLUMNS}, "reused_from": source["sweep_id"]}


def _report(rec: TrialRecorder, stage: dict | None):
    """The stored report under today's rules: its raw JSON parsed again (`parse_report`), the
    copied `report` row and the row's report columns set to what that says. A report with no
    raw bytes (none written, or not a regular file) keeps its stored verdict."""
    if not stage or not stage.get("raw"):
        return None
    status, report, reason = parse_report(stage["raw"].encode())
    between = rec.result.between
    between.report_status, between.report_python_path = status, report.python_path if report else None
    for row in (s for s in rec.stages if s.stage is Stage.REPORT):
        row.set(status="success" if report else "failure", reason=reason, failure_category=None if report else status)
    return report


def _close(rec: TrialRecorder, sandbox, egress: TrialEgress, staging: Path | None) -> None:
    """Remove the sandbox and stop the egress proxy (its log into the row); never raises. A
    removal that fails is appended to the row's failure_reason."""
    if sandbox is not None:
        try:
            sandbox.close()
        except Exception as exc:  # noqa: BLE001 - the egress proxy must still stop
            rec.result.settlement.note(f" [close failed: {exc}]")
    try:
        rec.result.network.set(**egress.close(rec.artifacts if staging is None else None))
    except Exception as exc:  # noqa: BLE001
        rec.result.settlement.note(f" [egress close failed: {exc}]")
    if staging is not None:
        shutil.rmtree(staging, ignore_errors=True)


def reprobe(run_dir: Path, sweep_id: str | None = None, trial_ids: list[str] | None = None,
            tasks_root: Path | None = None, assets_dir: Path | None = None, gpus: list[str] | None = None,
            progress=None, run_on=None) -> ReprobeResult:
    """Re-probe the selected trials under `run_dir` (module docstring). `gpus` are the physical
    GPU ids to give each sandbox (None: as many of the node's as the source attempt had);
    `progress(line)` gets one line per trial as it ends. `run_on(host, fn, args)` (a cluster's
    `reb_ray.orchestrators.on_node.NodeRunner`) runs an attempt kept on another node there, by
    `reprobe_there`, and its logs are stored here; without it such an attempt is reported as
    kept elsewhere. Raises RebRayError when nothing is selected, or a row's suite or task is no
    longer known."""
    from reb_ray.probing.toolbox import toolbox_key, toolbox_sources
    from reb_ray.trial import artifacts

    run_dir = Path(run_dir)
    sources, harbor = split_harbor(source_trials(run_dir, sweep_id, trial_ids), run_dir, "re-probed")
    by_attempt: dict[tuple, dict[str, dict]] = {}
    for stage in read_stages(run_dir, sweep_id).to_pylist():
        by_attempt.setdefault((stage["sweep_id"], stage["trial_id"], stage["attempt"]), {})[stage["stage"]] = stage
    toolbox = toolbox_key(toolbox_sources())
    here, suites, identities = node_gpus(), {}, {}
    result = ReprobeResult(missing=[(row, HARBOR_WHY) for row in harbor])
    for source in sources:
        suite = suites.setdefault(source["suite"], {t.id: t for t in load_suite(source["suite"], tasks_root)})
        if source["task_id"] not in suite:
            raise RebRayError(f"task {source['task_id']!r} is not in suite {source['suite']!r} any more; pass --tasks-root")
        identity = identities.setdefault(source["sweep_id"], stored_identity(run_dir, source["sweep_id"]))
        source_toolbox = source.get("probe_toolbox") or identity.get("probes")
        why = _no_image(source)
        node = source.get("node")
        if why is None:
            config = reprobe_config(source, identity, run_dir, assets_dir)
            stages = by_attempt.get((source["sweep_id"], source["trial_id"], source["attempt"]), {})
            image = source.get("env_image_tag") or source["env_image_id"][:19]
            if run_on is not None and node and node != socket.gethostname():
                try:
                    there = run_on(node, reprobe_there, (source, stages, suite[source["task_id"]], config, gpus, toolbox))
                except Exception as exc:  # noqa: BLE001 - that node's trouble is this attempt's line, not the run's end
                    there, why = None, f"re-probe on {node} failed: {type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
                if there is not None:
                    outcome, open_s = there
                    files, outcome.artifacts = outcome.artifacts, {}
                    artifacts.store(config.output.dir.resolve(), files)
                elif why is None:
                    why = f"its kept image {image} is gone from its node {node}"
            else:
                try:
                    outcome, open_s = reprobe_trial(source, stages, suite[source["task_id"]], config,
                                                    gpus_for(source, gpus, here), toolbox)
                except ImageMissing:
                    why = (f"its kept image {image} is gone from this node"
                           + (f" (it was kept on {node}: give --address to re-probe it there)"
                              if node and node != socket.gethostname() else ""))
        if why is not None:
            result.missing.append((source, why))
            line = f"{source['trial_id']} attempt {source['attempt']} of {source['sweep_id']}: not re-probed: {why}"
        else:
            item = Reprobed(outcome, source, source_toolbox, open_s, outcome.trial.get("probe_wall_time_s"))
            result.reprobed.append(item)
            line = reprobed_line(item)
        if progress is not None:
            progress(line)
    return result


def reprobed_line(item: Reprobed) -> str:
    """One line for a re-probed attempt: its verdicts against the source's, the toolbox that
    graded each, and the probe phase's seconds against the source's."""
    row, source = item.outcome.trial, item.source
    head = f"{row['trial_id']} attempt {row['attempt']} of {source['sweep_id']}: "
    if row["status"] != "scored":
        return head + f"re-probe failed ({row['status']}: {row.get('failure_reason')})"
    changed = differences(source, row)
    toolbox = (f"toolbox {row['probe_toolbox']} (same)" if item.source_toolbox == row["probe_toolbox"]
               else f"toolbox {item.source_toolbox or 'unknown'} -> {row['probe_toolbox']}")
    seconds = f"probe phase {item.probe_s:.1f} s" if item.probe_s is not None else "probe phase - s"
    if item.probe_s and source.get("probe_wall_time_s"):
        seconds += f" ({item.probe_s / source['probe_wall_time_s']:.2f}x the source's {source['probe_wall_time_s']:.1f} s)"
    if item.open_s is not None:
        seconds += f", sandbox from the kept image in {item.open_s:.1f} s"
    return head + ("same verdicts" if not changed else "changed " + "; ".join(changed)) + f"; {toolbox}; {seconds}"
