"""A trial's identity, and reusing scored trials of the same identity across sweeps.

A trial's score is decided by its agent (kind, model, arguments, limits, the pinned version of
its CLI), its task's spec, the probe toolbox (probe sources, pyright), the sandbox image, the
settings a trial runs under (timeouts, limits, CPUs, network policy) and its trial index; for an
agent of kind `reference`, also the digest of the task's reference recipe (the Dockerfile and the
files it copies, reb_ray.agents.reference.recipe_digest), since that agent builds what the recipe
says: a changed recipe is another trial, never a stale row reused. Other agents' identities do
not contain it, so they are what they were before recipes counted. Its
identity is a 16-hex digest of exactly those, taken from the sweep's scoring identity
(reb_ray.sweep.identity), so both agree on what counts. The agent's name, the sweep id and
everything volatile (Ray address, output and mirror paths, endpoints and their ports, keys,
concurrency, attempts, budgets, W&B) stay out: a renamed agent table, a moved output directory or
another cluster reuses what was scored.

A sweep reuses, for each of its trials not yet scored under its own id, a scored trial of the
same identity recorded in its output directory by any sweep: the trial's current scored attempt
(reb_ray.results.read.latest_attempts) is copied, trials and stages rows, into the sweep under
the sweep's own trial id, with `reused_from` naming the sweep that ran it (its artifact paths
still point at that run's files). Only original runs are candidates (rows with `reused_from`
null), the most recently finished first, and one original is reused at most once per sweep: two
agents of the same identity in one sweep are two samples, never one copied twice.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from reb_ray.models.sweep import TrialSpec

#: Keys of the sweep's scoring identity that every trial shares (the agent and task keys are per trial).
_SHARED = ("probes", "pyright", "image", "network_allow")


def trial_identities(specs: list[TrialSpec], scoring: dict[str, object]) -> dict[str, str]:
    """{trial_id: identity digest (16 hex)} of `specs`, from `scoring` (sweep_identity.scoring_identity
    of the same sweep). Raises KeyError for a spec whose agent or task `scoring` lacks."""
    from reb_ray.sweep.identity import SCORED_SETTINGS

    shared = {key: scoring[key] for key in (*_SHARED, *SCORED_SETTINGS) if key in scoring}
    out = {}
    for spec in specs:
        prefix = f"agent.{spec.agent}."
        agent = {key[len(prefix):]: value for key, value in scoring.items() if key.startswith(prefix)}
        value = {"shared": shared, "agent": agent, "task": scoring[f"task.{spec.task.id}"],
                 "trial_index": spec.trial_index}
        if agent.get("kind") == "reference":  # what it replays; no other agent's identity names it
            value["reference"] = scoring.get(f"reference.{spec.task.id}")
        out[spec.trial_id] = hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return out


@dataclass
class Reuse:
    """The trials a sweep takes over from earlier runs: {trial_id: (source sweep, source trial id,
    source attempt)}."""

    picks: dict[str, tuple[str, str, int]] = field(default_factory=dict)


_CANDIDATE_COLUMNS = ["sweep_id", "trial_id", "attempt", "status", "trial_identity", "reused_from", "finished_at"]


def plan_reuse(output: Path, sweep_id: str, specs: list[TrialSpec], identities: dict[str, str],
               history: pa.Table | None = None) -> Reuse:
    """Which of `specs` (trials of sweep `sweep_id` not scored under it) a scored original trial of
    the same identity under `output` covers (module docstring). `history`: every sweep's trials
    rows with at least _CANDIDATE_COLUMNS, as the sweep's start read them (None: read them now).
    Raises RebRayError for an unreadable results shard (reb_ray.results.read)."""
    from reb_ray.results.read import latest_attempts, read_trials

    wanted = set(identities[s.trial_id] for s in specs)
    reuse = Reuse()
    if not wanted:
        return reuse
    table = (history if history is not None else read_trials(output, columns=_CANDIDATE_COLUMNS)).select(_CANDIDATE_COLUMNS)
    table = table.filter(pc.and_(pc.is_valid(table["trial_identity"]), pc.is_null(table["reused_from"])))
    table = table.filter(pc.not_equal(table["sweep_id"], sweep_id))
    table = table.filter(pc.is_in(table["trial_identity"], pa.array(sorted(wanted), pa.string())))
    if not table.num_rows:
        return reuse
    latest = latest_attempts(table)
    latest = latest.filter(pc.equal(latest["status"], "scored"))
    pool: dict[str, list[dict]] = {}
    for row in sorted(latest.to_pylist(), key=lambda r: (r["finished_at"] is not None, r["finished_at"] or 0),
                      reverse=True):
        pool.setdefault(row["trial_identity"], []).append(row)
    for spec in specs:
        candidates = pool.get(identities[spec.trial_id])
        if candidates:
            row = candidates.pop(0)
            reuse.picks[spec.trial_id] = (row["sweep_id"], row["trial_id"], row["attempt"])
    return reuse


def reused_rows(output: Path, spec: TrialSpec, source: tuple[str, str, int]) -> tuple[dict, list[dict]]:
    """The trials row and stage rows of the attempt `source` (sweep, trial id, attempt) as rows of
    `spec`'s trial: its sweep, trial id, agent name and attempt number, `reused_from` the source
    sweep. Raises RebRayError for an unreadable shard, LookupError when the attempt is gone."""
    from reb_ray.results.read import read_stages, read_trials

    sweep, trial_id, attempt = source

    def pick(table: pa.Table) -> list[dict]:
        keep = pc.and_(pc.equal(table["trial_id"], trial_id), pc.equal(table["attempt"], attempt))
        return table.filter(keep).to_pylist()

    rows = pick(read_trials(output, sweep))
    if not rows:
        raise LookupError(f"sweep {sweep}: trial {trial_id} attempt {attempt} is no longer recorded")
    mine = {"sweep_id": spec.sweep_id, "trial_id": spec.trial_id, "agent": spec.agent, "attempt": spec.attempt}
    trial = {**rows[-1], **mine, "reused_from": sweep, "rerun": False}
    stages = [{**stage, **mine} for stage in pick(read_stages(output, sweep))]
    return trial, stages
