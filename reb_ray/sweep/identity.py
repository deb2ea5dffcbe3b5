"""A sweep's scoring identity, stored with its rows, and the drift check on resume.

A resumed sweep continues the trials of its first run, so everything that decides a trial's
score must be what it was: each agent's identity (kind, model, arguments, limits, and the pinned
version of its CLI), each task's spec (commit, commands, timeouts, rules, assets; for an agent of kind `reference`, the
recipe it replays), the probe
toolbox (probe sources, pyright and node versions), the sandbox image and the settings a trial
runs under (agent timeout, shm, limits, CPUs, network policy). Volatile fields never count
(a moved endpoint port must not make a finished sweep run again): the Ray address, output and mirror paths, endpoints and their ports, keys,
concurrency, attempts, budgets, W&B.

The identity is stored at `<output>/sweeps/<sweep_id>/identity.json` on the first run. A later
run compares: an agent or task that is new adds trials (not drift); a changed value is drift and
refuses the run in one line naming the fields, unless `--allow-drift`, which records the drifted
fields in the file's history and in each new row's `config_drift` column.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from reb_ray.errors import RebRayError
from reb_ray.models.sweep import SweepConfig
from reb_ray.models.task import TaskSpec

#: SweepConfig settings a trial's score depends on (the rest are volatile or bookkeeping), by
#: their flat-form names (`SweepConfig.flat`): the identity's keys and `config_drift`'s values
#: stay those of sweeps configured before sections, so their outputs resume.
SCORED_SETTINGS = ("sandbox", "image_profile", "agent_timeout_s", "shm_size_bytes", "pids_limit", "memory_bytes",
                   "disk_quota_bytes", "cpus_per_trial", "network_policy", "pip_cache", "skip_missing_assets",
                   "c4_cpu_gloo")


def _digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def task_digest(task: TaskSpec) -> str:
    """The 16-hex digest of a task spec stored as `task.<id>` in a sweep's identity (the task's
    directory left out, so a copy of the suite elsewhere has the same digest); a Harbor task's
    includes the digest of its files (`HarborRef.digest`)."""
    dumped = task.model_dump(mode="json")
    if task.harbor is not None:
        dumped["harbor"] = task.harbor.model_dump(mode="json")
    return _digest(dumped)


def scoring_identity(config: SweepConfig, image: str | None, tasks: list[TaskSpec]) -> dict[str, object]:
    """{field: value} of everything that decides a trial's score (module docstring); task specs
    and the toolbox as 16-hex digests. Keys: `agent.<name>.<field>` (kind, model, ..., cli), `task.<id>`, `probes`, `pyright`,
    `image`, `network_allow` and each of SCORED_SETTINGS; with an agent of kind `reference`,
    also `reference.<id>`: the digest of each task's reference recipe (None: no recipe)."""
    from reb_ray.agents.toolchain import PINS
    from reb_ray.probing.toolbox import toolbox_key, toolbox_sources

    sources = toolbox_sources()
    identity: dict[str, object] = {"probes": toolbox_key(sources), "pyright": sources.pyright_version, "image": image}
    for name in sorted(set(config.agents)):
        spec = config.agent_spec(name)
        pin = next((p for key, p in PINS.items() if key == spec.kind), None)
        for field, value in {**spec.identity(), "cli": f"{pin.package}@{pin.version}" if pin else None}.items():
            identity[f"agent.{name}.{field}"] = value
    for task in tasks:
        identity[f"task.{task.id}"] = task_digest(task)
    if any(config.agent_spec(name).kind == "reference" for name in config.agents):
        # The recipe a `reference` agent replays decides its trials as the task's spec does;
        # kept out of sweeps without one, so their identities stay what they were.
        from reb_ray.agents.reference import recipe_digest

        for task in tasks:
            identity[f"reference.{task.id}"] = recipe_digest(task)
    flat = config.flat()
    for field in SCORED_SETTINGS:
        identity[field] = flat[field]
    identity["network_allow"] = sorted(config.network.allow) if config.network.policy != "open" else None
    return identity


def identity_path(output: Path, sweep_id: str) -> Path:
    """Where the sweep's identity is stored."""
    return Path(output) / "sweeps" / sweep_id / "identity.json"


def drifted(stored: dict[str, object], current: dict[str, object]) -> list[str]:
    """Fields whose value changed, sorted; fields in only one of the two are not drift (a new
    agent or task adds trials; a dropped one just is not run)."""
    return sorted(k for k in stored.keys() & current.keys() if json.dumps(stored[k], sort_keys=True, default=str)
                  != json.dumps(current[k], sort_keys=True, default=str))


def check_identity(output: Path, sweep_id: str, current: dict[str, object], allow_drift: bool,
                   scored: bool = True) -> list[str]:
    """Store `current` on a sweep's first run; on a later one return the drifted fields (empty
    when none) after recording them, or raise RebRayError naming them unless `allow_drift`.
    Fields added since are merged into the stored identity. `scored` False (no trial of the
    sweep is scored yet: e.g. every attempt failed for a missing asset) stores `current` afresh:
    there is nothing to be consistent with. Raises RebRayError for an unreadable identity file
    (naming it)."""
    path = identity_path(output, sweep_id)
    record = {"identity": {}, "history": []}
    if path.exists() and scored:
        try:
            record = json.loads(path.read_text())
            stored = record["identity"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise RebRayError(f"{path}: unreadable sweep identity ({exc}); move it away to start the sweep afresh") from None
    else:
        stored = {}
    changed = drifted(stored, current)
    if changed and not allow_drift:
        detail = ", ".join(f"{k} ({_short(stored[k])} -> {_short(current[k])})" for k in changed[:6])
        more = f" and {len(changed) - 6} more" if len(changed) > 6 else ""
        raise RebRayError(f"sweep {sweep_id}: scoring settings changed since its first run: {detail}{more}; rerun with "
                          "--allow-drift (recorded) or use another --sweep-id")
    merged = {**current, **{k: v for k, v in stored.items() if k not in current}}
    if changed:
        merged.update({k: stored[k] for k in changed})  # the first run's values stay the reference
        record["history"].append({"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "allowed_drift": changed,
                                  "values": {k: current[k] for k in changed}})
    record["identity"] = merged
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(record, indent=1, sort_keys=True, default=str))
    os.replace(tmp, path)  # never a torn identity file
    return changed


def _short(value) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 60 else text[:57] + "..."
