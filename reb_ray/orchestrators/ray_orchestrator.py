"""Running trial specs on Ray: long-lived slot workers, each running many trials in turn.

The run plans the cluster's sandbox slots (`plan_slots`: a GPU slot per usable GPU, CPU slots
in the CPU room left), starts one worker actor per slot (`SlotWorker`), and sends each trial to
free slots as the `Dispatcher` decides (longest expected first, a k-GPU trial on k GPU slots
of one node, no head-of-line blocking, a drained node for a multi-GPU trial that waits). A trial
needing more GPUs than any node has is capped to the largest node (its stages that need more
are `insufficient_hardware`); when no node can hold a single slot (say `--cpus-per-trial 8` on
2-CPU nodes), every trial is recorded at once as `insufficient_hardware` (owner hardware) and
the run ends, since Ray would keep such a request pending for ever and hang the sweep.

Before any trial, every node is prepared and checked (`NodeChecks`:
orphans reaped, Docker, image (shipped from the driver when missing), free disk, mirrors and
assets); a node that fails gets no slots and is named in one line (`on_node_line`), and when
none passes the run raises NoUsableNode before any row. The cluster's nodes are read again every
`poll_s` seconds: a node that joins (an autoscaled GPU worker) is checked the same way and gets
slots for the trials still waiting. Each GPU node also checks that its Docker gives containers
GPUs (`docker_gpu_problems`); a node that cannot gets no GPU slots, and a trial run
without GPUs because no node can has its GPU stages `insufficient_hardware` saying why. Each
outcome goes to the sink the moment it arrives; infrastructure failures are retried as new
attempts (`max_attempts` per run). When a slot's actor dies, its attempt's container is removed
on its node before the retry is queued, and the slot is replaced. On Ctrl-C the actors are
killed and their containers reaped; rows already written stay.

LLM agents: their trials reach the node's metering proxy (`NodeProxies`, one actor per node). The driver makes a node's proxy and hands it its values of
the sweep's LLM key variables, sealed, before the node's first trial (and again after a trial
found the proxy gone); no trial's worker ever holds a key. The proxies are stopped when the run
ends. An attempt that failed for a rate limit
or an unavailable endpoint is retried after a backoff (reb_ray.scheduling.budget.RetryBackoff); one
that failed for LLM authentication or budget is not retried (the next would fail the same
way). With a sweep budget (`--max-cost-usd`), no new attempt is launched once it is reached;
the specs left are in `not_launched`.

Agent-phase GPU sharing (`cluster.share_gpus_in_agent_phase`): no slot holds a GPU. GPU trials run on sharing slots of
GPU nodes (`plan_shared_slots`: every node with GPUs; a trial goes only to a node with as many
GPUs as it needs) and their probe phases lease the node's GPUs exclusively from
its lease actor (`NodeGpuLease`), which holds them in
Ray's accounting; a trial's agent phase sees as many of the node's GPUs as it will lease.
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from dataclasses import dataclass
from itertools import count
from typing import Callable

import ray

from reb_ray.errors import first_line
from reb_ray.scheduling.budget import RetryBackoff, SweepBudget
from reb_ray.llm.failures import NOT_RETRIED, PROXY, RETRYABLE
from reb_ray.models.sweep import SweepConfig, TrialSpec
from reb_ray.orchestrators.attempt_rows import driver_outcome, unplaceable_outcome
from reb_ray.scheduling.dispatch import Dispatcher, Job
from reb_ray.orchestrators.autoscaler import BOOTSTRAP_CONFIG, joinable_node_types, request_gpu_nodes
from reb_ray.scheduling.durations import timeout_estimate
from reb_ray.orchestrators.head_watch import HeadLost
from reb_ray.orchestrators.llm_proxy import NodeProxies, stop_proxies
from reb_ray.orchestrators.node_check import NodeChecks, NodeRequirements, alive_nodes
from reb_ray.orchestrators.node_roster import NodeRoster, NoUsableNode
from reb_ray.orchestrators.node_tasks import reap_on, remove_dead_attempt
from reb_ray.scheduling.slot_plan import gpu_cap, hardware_refusal
from reb_ray.orchestrators.slot_pool import Slot, SlotPool
from reb_ray.trial.record import TrialOutcome
from reb_ray.trial.record import now


@dataclass
class _Attempt:
    """One launched attempt: its spec, its slot keys (leader first), the leader, when launched."""

    spec: TrialSpec
    keys: list[int]
    slot: Slot
    launched_at: dt.datetime


@dataclass(frozen=True)
class SlotTiming:
    """How a run starts its slot workers and watches the cluster: the driver's knobs, not a
    sweep's settings (benchmarks and tests set them). `start_concurrency`: slot workers starting at
    once (None: all); `start_timeout_s`: seconds a slot may take to come up; `poll_s`: seconds
    between reads of the cluster's nodes; `autoscaler_config`: where `ray up` left the node types
    an autoscaler may start (reb_ray.orchestrators.autoscaler); `slots_per_worker`: slots of a
    node sharing one worker process (None: all of a node's; SlotPool)."""

    start_concurrency: int | None = None
    slots_per_worker: int | None = 1
    start_timeout_s: float = 600.0
    poll_s: float = 5.0
    autoscaler_config: Path = BOOTSTRAP_CONFIG


class RayOrchestrator:
    """Schedules trial specs on the connected Ray cluster.

    `config` is the sweep's configuration; the orchestrator reads its `cluster` section
    (`max_concurrent`: trials at once, None: the cluster's slots; `share_gpus_in_agent_phase`:
    agent phases share their node's GPUs, probe phases lease them, see the module docstring),
    its `sandbox` section (`cpus_per_trial`, a slot's CPUs; `memory_bytes`, the sandbox memory,
    None: each node's default, checked against the largest node) and its `llm` section (the
    backoff before retrying a rate-limited attempt, RetryBackoff).

    `on_outcome(outcome, will_retry)` is called on the driver for every finished attempt;
    `on_start(spec)` when an attempt is launched. An infra failure is retried as a new
    attempt while the spec has `retries_left` (not an LLM auth or budget failure; a rate limit
    or an unavailable endpoint after the backoff). `docker_image` (the docker sandbox's image;
    None for other sandboxes) turns on the per-node GPU check and the removal of a dead
    attempt's container. `budget`: the sweep's `--max-cost-usd` (None: no limit); every
    finished attempt's row is added to it. `expected_s(spec)`: a trial's expected seconds for
    longest-first dispatch (default: its timeouts). `timing`: how slots start and the cluster
    is watched (SlotTiming). After `run`, `slots_created` counts the slot actors it created and
    `slot_up_s` holds each one's seconds from the first slot asked for until it was up
    (`slot_up_cpu_s`: the CPU seconds its worker process used until then).

    `requirements`: what every node must have (node_check.NodeRequirements; None: no memory
    or path needs, the docker image's checks only); `on_node_line(line)` gets one line per node
    that fails its check (the caller prints and logs it). `nodes` is the run's NodeRoster
    (reb_ray.orchestrators.node_roster): after `run`, `nodes.verdicts` holds every node's check.
    """

    def __init__(self, config: SweepConfig, docker_image: str | None = None, *, budget: SweepBudget | None = None,
                 expected_s: Callable[[TrialSpec], float] = timeout_estimate,
                 requirements: NodeRequirements | None = None, on_node_line: Callable[[str], None] = lambda line: None,
                 timing: SlotTiming = SlotTiming()) -> None:
        self.max_concurrent = config.cluster.max_concurrent
        self.cpus_per_trial = config.sandbox.cpus_per_trial
        self.backoff = RetryBackoff(config.llm.retry_backoff_s, config.llm.retry_backoff_max_s)
        self.budget = budget
        self.expected_s = expected_s
        self.slot_start_concurrency = timing.start_concurrency
        self.slots_per_worker = timing.slots_per_worker
        self.slot_start_timeout_s = timing.start_timeout_s
        self.not_launched: list[TrialSpec] = []  # left by the sweep budget
        self.slots_created = 0
        self.workers_created = 0  # slot worker processes (SlotTiming.slots_per_worker)
        self.slot_up_s: list[float] = []  # SlotPool.up_s of the run
        self.slot_up_cpu_s: list[float] = []  # SlotPool.up_cpu_s of the run
        self.docker = docker_image is not None
        self.poll_s = timing.poll_s
        self.autoscaler_config = timing.autoscaler_config
        self.memory_bytes = config.sandbox.memory_bytes
        self.share_gpus = config.cluster.share_gpus_in_agent_phase
        self.no_gpus_anywhere: str | None = None  # why no node can give containers GPUs (set by `run`)
        # Set (from the head watch's thread) when the head died: the loop raises HeadLost at its
        # next turn and makes no more Ray calls, which would block until Ray ends the process.
        self.head_lost: str | None = None
        self.nodes = NodeRoster(requirements or NodeRequirements(docker_image, 0), docker_image, self.cpus_per_trial,
                                self.max_concurrent, on_node_line, self.share_gpus, self.slot_start_timeout_s)

    def run(self, specs: list[TrialSpec], on_outcome: Callable[[TrialOutcome, bool], None],
            on_start: Callable[[TrialSpec], None] = lambda spec: None) -> None:
        checks = NodeChecks(self.nodes.requirements)
        try:
            self._run_checked(specs, checks, on_outcome, on_start)
        finally:
            checks.close()

    def _run_checked(self, specs: list[TrialSpec], checks: NodeChecks, on_outcome: Callable[[TrialOutcome, bool], None],
                     on_start: Callable[[TrialSpec], None]) -> None:
        nodes = self.nodes.check_at_start(checks)
        joinable = joinable_node_types(self.autoscaler_config)
        why = hardware_refusal(nodes + joinable, self.cpus_per_trial, self.memory_bytes)
        if why is not None:
            for spec in specs:
                on_outcome(unplaceable_outcome(spec, why), False)
            return
        cap = gpu_cap(nodes + joinable, self.cpus_per_trial)
        if self.share_gpus:  # no slot holds a GPU: a trial can lease every usable GPU of a node
            cap = max((n.gpus for n in nodes + joinable if n.gpus_usable), default=0)
        # No node can give containers GPUs: trials hold none, and every one says why.
        no_gpus = self.nodes.no_gpu_nodes
        self.no_gpus_anywhere = next(iter(no_gpus.values())) if no_gpus and cap == 0 else None
        needs = [min(spec.task.gpus_needed, cap) for spec in specs]
        pool = SlotPool(self.nodes.plan(nodes, needs), self.cpus_per_trial, self.slot_start_concurrency,
                        self.slot_start_timeout_s, self.slots_per_worker)
        asked = bool(joinable) and any(needs)
        if asked:  # the slots are pinned to nodes that exist: ask the autoscaler for the GPU nodes itself
            limit = (self.max_concurrent or len(specs)) * max(needs)
            request_gpu_nodes([{"CPU": self.cpus_per_trial, "GPU": 1}] * min(sum(needs), limit))
        try:
            self._run(specs, cap, pool, on_outcome, on_start, checks, bool(joinable))
        finally:
            self.nodes.stop_leases()
            if asked:
                request_gpu_nodes([])

    def _run(self, specs: list[TrialSpec], cap: int, pool: SlotPool,
             on_outcome: Callable[[TrialOutcome, bool], None], on_start: Callable[[TrialSpec], None],
             checks: NodeChecks, may_grow: bool) -> None:
        dispatcher = Dispatcher(self.max_concurrent)
        jobs: dict[int, TrialSpec] = {}
        keys = count()

        def submit(spec: TrialSpec) -> None:
            key = next(keys)
            jobs[key] = spec
            gpus = min(spec.task.gpus_needed, cap)
            # Sharing: a GPU trial takes one sharing slot of a node with its GPUs, leased from that node.
            if self.share_gpus:
                dispatcher.submit(Job(key, min(gpus, 1), self.expected_s(spec), lease=gpus))
            else:
                dispatcher.submit(Job(key, gpus, self.expected_s(spec)))

        for spec in specs:
            submit(spec)
        waiting: list[tuple[float, TrialSpec]] = []  # retries in their backoff: (monotonic launch time, spec)
        llm_retries: dict[str, int] = {}  # backoff retries so far, per trial_id
        inflight: dict[ray.ObjectRef, _Attempt] = {}
        finished: list[tuple[TrialOutcome, TrialSpec, bool]] = []  # (outcome, spec, will retry) to hand on
        proxy = _node_proxies(specs)
        pool.start()
        polled = time.monotonic()
        try:
            while dispatcher.pending or inflight or waiting:
                if self.head_lost is not None:
                    raise HeadLost(self.head_lost)
                for t, spec in [w for w in waiting if w[0] <= time.monotonic()]:
                    waiting.remove((t, spec))
                    submit(spec)
                if time.monotonic() - polled >= self.poll_s:  # nodes that joined since: checked, then given slots
                    polled = time.monotonic()
                    for node in alive_nodes():
                        if node["NodeID"] not in checks.seen:
                            checks.submit(node)
                for verdict in checks.expire(time.monotonic()):
                    pool.add(self.nodes.joined(verdict, [min(g, cap) for g in dispatcher.pending_gpus()]))
                self._launch(dispatcher, jobs, pool, proxy, inflight, on_start)
                # While a node may still join (a check in flight, an autoscaler's node types), jobs wait for it.
                larger = [] if checks.busy or may_grow else dispatcher.take_larger_than(
                    pool.most_gpu_slots(), pool.most_lease_gpus() if self.share_gpus else None)
                for job in larger:
                    # Its nodes left the cluster (or their workers could not be restarted): no slot can run it.
                    on_outcome(driver_outcome(jobs.pop(job.key), "infra_node", f"needs {max(job.gpus, job.lease)} GPU(s) "
                                              "of one node, and no node has that many left (nodes or slot workers were lost)"), False)
                refs = list(inflight) + pool.starting_refs() + checks.refs()
                if not refs:
                    time.sleep(0.1)  # only retries in their backoff, or nodes still to join, are left
                    continue
                ready, _ = ray.wait(refs, num_returns=1, timeout=1.0)
                if ready:
                    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
                for ref in ready:
                    if ref in checks.refs():
                        verdict = checks.on_ready(ref)
                        if verdict is not None:
                            pool.add(self.nodes.joined(verdict, [min(g, cap) for g in dispatcher.pending_gpus()]))
                        continue
                    attempt = inflight.pop(ref, None)
                    if attempt is None:
                        slot = pool.on_ready(ref)
                        if slot is not None:
                            dispatcher.add_slot(slot.key, slot.shape.node_id, slot.shape.gpu, slot.shape.node_gpus)
                        continue
                    outcome = self._outcome(ref, attempt, pool, dispatcher)
                    if proxy is not None and outcome.trial.get("failure_category") == PROXY:
                        proxy.forget(attempt.slot.where["node_id"])  # made again, with the keys, before its next trial
                    dispatcher.finish(attempt.keys)
                    finished.append((outcome, attempt.spec, self._retry(outcome, attempt.spec, waiting, llm_retries, submit)))
                pool.expire(time.monotonic())  # never up: not in the dispatcher yet
                if finished:
                    # The freed slots get their next trials before the rows are written (the sink is slow).
                    self._launch(dispatcher, jobs, pool, proxy, inflight, on_start)
                while finished:
                    outcome, _spec, retry = finished.pop(0)
                    on_outcome(outcome, retry)
        finally:
            while finished:  # interrupted before they were handed on
                outcome, _spec, retry = finished.pop(0)
                on_outcome(outcome, retry)
            busy = bool(inflight)
            self.slots_created, self.slot_up_s, self.slot_up_cpu_s = pool.created, list(pool.up_s), list(pool.up_cpu_s)
            self.workers_created = pool.workers_created
            # After the head died, no Ray call: with no GCS, or no raylet to reach it, each would block.
            if self.head_lost is None:
                pool.kill_all()
                if busy:
                    _reap_after_kill()
                if proxy is not None:
                    stop_proxies()

    def _outcome(self, ref: ray.ObjectRef, attempt: _Attempt, pool: SlotPool, dispatcher: Dispatcher) -> TrialOutcome:
        """The attempt's rows; a dead slot worker gives an infra row, and the slot is replaced."""
        try:
            return ray.get(ref)
        except ray.exceptions.RayActorError as exc:
            dispatcher.remove_slot(attempt.slot.key)
            for key in pool.replace(attempt.slot.key):  # its worker's other slots left with it
                dispatcher.remove_slot(key)
            return self._dead_attempt(attempt, exc)
        except ray.exceptions.RayError as exc:  # the worker lives (e.g. a result that did not deserialise)
            return driver_outcome(attempt.spec, "infra_node", first_line(exc, 500), node=attempt.slot.where["node"],
                                  started_at=attempt.launched_at)

    def _dead_attempt(self, attempt: _Attempt, exc: ray.exceptions.RayError) -> TrialOutcome:
        """The infra row of an attempt whose slot worker died; its container is removed on its
        node first (before the retry is queued), so the agent left running in it stops at once."""
        where = attempt.slot.where
        message = first_line(exc, 500)
        if self.docker:
            message += f"; {remove_dead_attempt(where['node_id'], attempt.spec, host=where['node'])}"
            reap_on(where["node_id"])  # whatever else the dead worker's process left on its node
        return driver_outcome(attempt.spec, "infra_node", message, node=where["node"], started_at=attempt.launched_at)

    def _launch(self, dispatcher: Dispatcher, jobs: dict[int, TrialSpec], pool: SlotPool, proxy: NodeProxies | None,
                inflight: dict[ray.ObjectRef, _Attempt], on_start: Callable[[TrialSpec], None]) -> None:
        """Send every trial the dispatcher places now to its slot (the gang leader runs it with
        the gang's GPU ids). Once the sweep's budget is spent, nothing is launched any more.
        The LLM proxies of the nodes they go to are made first (NodeProxies.ensure)."""
        if self.budget is not None and self.budget.reached and dispatcher.pending:
            self.not_launched.extend(jobs.pop(job.key) for job in dispatcher.take_pending())
        placed = list(dispatcher.assign(time.monotonic()))
        if proxy is not None and placed:
            proxy.ensure(pool.slots[keys[0]].where["node_id"] for _, keys in placed)
        for job, slot_keys in placed:
            spec = jobs.pop(job.key)
            leader = pool.slots[slot_keys[0]]
            gpus = [g for k in slot_keys for g in pool.slots[k].gpu_ids] if job.gpus else []
            reason = self.nodes.no_gpu_nodes.get(leader.where["node_id"], self.no_gpus_anywhere)
            lease = self.nodes.lease(spec, leader) if leader.shape.shares_gpus else None
            ref = leader.actor.run.remote(spec, gpus, reason, proxy.client() if proxy is not None else None, lease)
            inflight[ref] = _Attempt(spec, slot_keys, leader, now())
            on_start(spec)

    def _retry(self, outcome: TrialOutcome, spec: TrialSpec, waiting: list[tuple[float, TrialSpec]],
               llm_retries: dict[str, int], submit: Callable[[TrialSpec], None]) -> bool:
        """Count the attempt against the budget and queue its retry; whether it is retried."""
        if self.budget is not None:
            self.budget.add(outcome.trial)
        category = outcome.trial.get("failure_category")
        retry = outcome.status == "infra_error" and spec.retries_left > 0 and category not in NOT_RETRIED
        if retry and category in RETRYABLE:
            n = llm_retries[spec.trial_id] = llm_retries.get(spec.trial_id, 0) + 1
            delay = self.backoff.delay(n, outcome.trial.get("llm_retry_after_s"))
            waiting.append((time.monotonic() + delay, spec.next_attempt()))
        elif retry:
            submit(spec.next_attempt())
        return retry


def _node_proxies(specs: list[TrialSpec]) -> NodeProxies | None:
    """The driver's way to the nodes' metering proxies when any spec's agent uses an LLM, else
    None. It holds the driver's values of those agents' key variables (read from its
    environment here; expand checked they are set), which only the proxies receive, sealed."""
    import os

    from reb_ray.agents import get_agent

    keys: dict[str, str] = {}
    uses: dict[str, bool] = {}
    for spec in specs:
        if spec.agent not in uses:
            uses[spec.agent] = get_agent(spec.agent_spec).uses_llm
        key_env = spec.agent_spec.key_env
        if uses[spec.agent] and key_env and os.environ.get(key_env):
            keys[key_env] = os.environ[key_env]
    if not any(uses.values()):
        return None
    from reb_ray.trial.egress import sandbox_network

    config = specs[0].config
    # Bound where the sandboxes are: the gateway of reb-ray's network for the policy.
    return NodeProxies(keys, config.sandbox.provider, sandbox_network(config), str(config.llm.prices_file) if config.llm.prices_file else None)


def _reap_after_kill() -> None:
    """Killed actors leave their containers behind: their owner is gone, so the reaper takes them."""
    from reb_ray.errors import RebRayError
    from reb_ray.sandbox.docker.reaper import reap

    time.sleep(1.0)  # let the killed worker processes exit so their owners read as gone
    try:
        reap()
    except RebRayError:
        pass
