"""Running trial specs on Ray: one actor per running trial, each owning its sandbox.

Resources per trial come from the trial (CPUs; GPUs as the task needs, capped by the largest
node whose Docker can give containers GPUs, so a trial never waits forever for GPUs that do not
exist or cannot be used). Before any trial, each GPU node checks that its Docker gives
containers GPUs (reb_ray/orchestrators/node_tasks.py); a trial on a node that cannot runs
without GPUs and its GPU stages are `insufficient_hardware`. Concurrency is bounded by
`max_concurrent` and by what Ray can place. Each outcome goes to the sink the moment it
arrives; infrastructure failures are retried as new attempts (`max_attempts` per run). When
an actor dies, its attempt's container is removed on its node before the retry starts. On
Ctrl-C the actors are killed and their containers reaped; rows already written stay.

LLM agents (issue 10): their trials reach the node's metering proxy
(reb_ray/orchestrators/llm_proxy.py), which holds the driver's values of the sweep's LLM key
variables; the proxies are stopped when the run ends. An attempt that failed for a rate limit
or an unavailable endpoint is retried after a backoff (reb_ray.llm.budget.RetryBackoff); one
that failed for LLM authentication or budget is not retried (the next would fail the same
way). With a sweep budget (`--max-cost-usd`), no new attempt is launched once it is reached;
the specs left are in `not_launched`.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable

import ray

from reb_ray.llm.budget import RetryBackoff, SweepBudget
from reb_ray.llm.failures import NOT_RETRIED, RETRYABLE
from reb_ray.models.sweep import TrialSpec
from reb_ray.orchestrators.llm_proxy import RayProxyClient, stop_proxies
from reb_ray.orchestrators.node_tasks import docker_gpu_problems, remove_dead_attempt
from reb_ray.trial import TrialOutcome, run_trial
from reb_ray.trial_record import now


@ray.remote
class TrialActor:
    """Owns one trial's sandbox for the trial's lifetime."""

    def where(self) -> dict:
        """Where and when this actor runs: node_id (Ray's), node (host name), pid, started_at.

        Called right before `run`, so the driver holds the answer even if the actor dies
        during the trial."""
        return {"node_id": ray.get_runtime_context().get_node_id(), "node": socket.gethostname(), "pid": os.getpid(),
                "started_at": now()}

    def run(self, spec: TrialSpec, no_gpu_nodes: dict[str, str], no_gpus_anywhere: str | None,
            llm_proxy: RayProxyClient | None = None) -> TrialOutcome:
        """`no_gpu_nodes`: {node id: why its Docker cannot give containers GPUs};
        `no_gpus_anywhere`: why no node can (then trials were given none); `llm_proxy`: the
        way to this node's metering proxy (sweeps with an LLM agent)."""
        gpus = [str(g) for g in ray.get_gpu_ids()]
        reason = no_gpu_nodes.get(ray.get_runtime_context().get_node_id(), no_gpus_anywhere)
        return run_trial(spec, gpus, reason, llm_proxy=llm_proxy, ship_artifacts=True)  # no shared filesystem assumed


def max_gpus_per_node(excluded: frozenset[str] | set[str] = frozenset()) -> int:
    """The most GPUs any alive node of the cluster has, nodes with ids in `excluded` left out."""
    return max((int(n["Resources"].get("GPU", 0)) for n in ray.nodes() if n.get("Alive") and n["NodeID"] not in excluded),
               default=0)


def infra_outcome(spec: TrialSpec, category: str, message: str, *, node: str | None = None,
                  started_at: dt.datetime | None = None) -> TrialOutcome:
    """A row for an attempt whose actor died or was killed before returning.

    `node` is the host the attempt ran on, `started_at` when it started (UTC).
    """
    finished = now()
    row = {
        "sweep_id": spec.sweep_id, "trial_id": spec.trial_id, "attempt": spec.attempt, "trial_index": spec.trial_index,
        "task_id": spec.task.id, "suite": spec.task.suite, "agent": spec.agent, "sandbox_provider": spec.config.sandbox,
        "c0_total": spec.task.c0_baseline_total, "status": "infra_error", "failure_owner": "infra",
        "failure_category": category, "failure_reason": f"{category}: {message}"[:2000],
        "node": node, "started_at": started_at, "finished_at": finished, "rerun": spec.rerun,
        "trial_wall_time_s": (finished - started_at).total_seconds() if started_at else None,
        "sweep_max_cost_usd": spec.config.max_cost_usd, "network_policy": spec.config.network_policy,
    }
    return TrialOutcome(row, [])


@dataclass
class _Attempt:
    """One launched attempt: its actor, its spec, the actor's `where` answer, when it was launched."""

    actor: ray.actor.ActorHandle
    spec: TrialSpec
    where: ray.ObjectRef
    launched_at: dt.datetime


class RayOrchestrator:
    """Schedules trial specs on the connected Ray cluster.

    `on_outcome(outcome, will_retry)` is called on the driver for every finished attempt;
    `on_start(spec)` when an attempt is launched. An infra failure is retried as a new
    attempt while the spec has `retries_left` (not an LLM auth or budget failure; a rate limit
    or an unavailable endpoint after `backoff`). `docker_image` (the docker sandbox's image;
    None for the local sandbox) turns on the per-node GPU check and the removal of a dead
    attempt's container. `budget`: the sweep's `--max-cost-usd` (None: no limit); every
    finished attempt's row is added to it.
    """

    def __init__(self, max_concurrent: int, cpus_per_trial: float, docker_image: str | None = None, *,
                 backoff: RetryBackoff | None = None, budget: SweepBudget | None = None) -> None:
        self.max_concurrent = max_concurrent
        self.cpus_per_trial = cpus_per_trial
        self.backoff = backoff or RetryBackoff()
        self.budget = budget
        self.not_launched: list[TrialSpec] = []  # left by the sweep budget
        self.docker = docker_image is not None
        self.no_gpu_nodes = docker_gpu_problems(docker_image) if docker_image else {}
        self.gpu_cap = max_gpus_per_node(set(self.no_gpu_nodes))
        # No node can give containers GPUs: trials hold none, and every one says why.
        self.no_gpus_anywhere = next(iter(self.no_gpu_nodes.values())) if self.no_gpu_nodes and self.gpu_cap == 0 else None

    def run(self, specs: list[TrialSpec], on_outcome: Callable[[TrialOutcome, bool], None],
            on_start: Callable[[TrialSpec], None] = lambda spec: None) -> None:
        pending = deque(specs)
        waiting: list[tuple[float, TrialSpec]] = []  # retries in their backoff: (monotonic launch time, spec)
        llm_retries: dict[str, int] = {}  # backoff retries so far, per trial_id
        inflight: dict[ray.ObjectRef, _Attempt] = {}
        proxy = _proxy_client(specs)
        try:
            while pending or inflight or waiting:
                pending.extend(s for t, s in waiting if t <= time.monotonic())
                waiting = [(t, s) for t, s in waiting if t > time.monotonic()]
                if self.budget is not None and self.budget.reached and pending:
                    self.not_launched.extend(pending)  # the sweep's budget is spent: launch nothing new
                    pending.clear()
                while pending and len(inflight) < self.max_concurrent:
                    spec = pending.popleft()
                    gpus = min(spec.task.gpus_needed, self.gpu_cap)
                    actor = TrialActor.options(num_cpus=self.cpus_per_trial, num_gpus=gpus).remote()
                    where = actor.where.remote()
                    ref = actor.run.remote(spec, self.no_gpu_nodes, self.no_gpus_anywhere, proxy)
                    inflight[ref] = _Attempt(actor, spec, where, now())
                    on_start(spec)
                if not inflight:
                    time.sleep(0.1 if waiting else 0)  # only retries in their backoff are left
                    continue
                ready, _ = ray.wait(list(inflight), num_returns=1, timeout=1.0)
                for ref in ready:
                    attempt = inflight.pop(ref)
                    spec = attempt.spec
                    try:
                        outcome = ray.get(ref)
                    except ray.exceptions.RayError as exc:
                        outcome = self._dead_attempt(attempt, exc)
                    ray.kill(attempt.actor)
                    if self.budget is not None:
                        self.budget.add(outcome.trial)
                    category = outcome.trial.get("failure_category")
                    retry = outcome.status == "infra_error" and spec.retries_left > 0 and category not in NOT_RETRIED
                    on_outcome(outcome, retry)
                    if retry and category in RETRYABLE:
                        n = llm_retries[spec.trial_id] = llm_retries.get(spec.trial_id, 0) + 1
                        delay = self.backoff.delay(n, outcome.trial.get("llm_retry_after_s"))
                        waiting.append((time.monotonic() + delay, spec.next_attempt()))
                    elif retry:
                        pending.append(spec.next_attempt())
        finally:
            for attempt in inflight.values():
                ray.kill(attempt.actor)
            if inflight:
                _reap_after_kill()
            if proxy is not None:
                stop_proxies()

    def _dead_attempt(self, attempt: _Attempt, exc: ray.exceptions.RayError) -> TrialOutcome:
        """The infra row of an attempt whose actor died; its container is removed on its node
        first (before the retry is queued), so the agent left running in it stops at once."""
        try:
            where = ray.get(attempt.where, timeout=10)
        except (ray.exceptions.RayError, TimeoutError):
            where = None  # the actor died before it answered: it never started the trial
        message = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:500]
        node_id = where["node_id"] if where else _dead_actor_node_id(attempt.actor)
        if self.docker and where is not None:
            message += f"; {remove_dead_attempt(where['node_id'], attempt.spec)}"
        return infra_outcome(attempt.spec, "infra_node", message, node=where["node"] if where else _host_of(node_id),
                             started_at=where["started_at"] if where else attempt.launched_at)


def _proxy_client(specs: list[TrialSpec]) -> RayProxyClient | None:
    """The way to the nodes' metering proxies when any spec's agent uses an LLM, else None.

    It carries the driver's values of those agents' key variables (their specs' credentials),
    which reach only the proxy actors' environment."""
    from reb_ray.agents import get_agent

    env: dict[str, str] = {}
    uses: dict[str, bool] = {}
    for spec in specs:
        if spec.agent not in uses:
            uses[spec.agent] = get_agent(spec.agent_spec).uses_llm
        key_env = spec.agent_spec.key_env
        if uses[spec.agent] and key_env and key_env in spec.credentials:
            env[key_env] = spec.credentials[key_env]
    if not any(uses.values()):
        return None
    from reb_ray.netpolicy.trial_egress import sandbox_network

    config = specs[0].config
    # Bound where the sandboxes are: the gateway of reb-ray's network for the policy.
    return RayProxyClient(env, config.sandbox, sandbox_network(config),
                          str(config.prices_file) if config.prices_file else None)


def _dead_actor_node_id(actor: ray.actor.ActorHandle) -> str | None:
    """The node a dead actor was placed on, from the GCS actor table (best effort).

    Ray has no public call for this without its dashboard; a failure gives None."""
    try:
        from ray._private.state import actors

        return actors(actor._actor_id.hex())["Address"]["NodeID"] or None
    except Exception:  # noqa: BLE001 - a private API: any change in it only loses the node name
        return None


def _host_of(node_id: str | None) -> str | None:
    """The host name of Ray node `node_id`, or None when unknown."""
    return next((n.get("NodeManagerHostname") for n in ray.nodes() if node_id and n["NodeID"] == node_id), None)


def _reap_after_kill() -> None:
    """Killed actors leave their containers behind: their owner is gone, so the reaper takes them."""
    from reb_ray.errors import RebRayError
    from reb_ray.sandbox.reaper import reap

    time.sleep(1.0)  # let the killed worker processes exit so their owners read as gone
    try:
        reap()
    except RebRayError:
        pass
