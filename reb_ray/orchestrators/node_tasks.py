"""Small Ray tasks pinned to one node: its Docker's GPU check, removing a dead attempt's
containers (before its retry is queued, so two attempts of one trial never run at once), and
reaping the node's orphans when a slot worker died there. Each runs with no CPU reserved, so a full node still
answers, and with hard node affinity, so it acts on that node's Docker daemon and no other.
"""

from __future__ import annotations

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from reb_ray.errors import first_line
from reb_ray.models.sweep import TrialSpec


def _on(node_id: str) -> NodeAffinitySchedulingStrategy:
    return NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)


@ray.remote(num_cpus=0)
def _docker_gpu_problem_here(image: str) -> str | None:
    from reb_ray.errors import RebRayError
    from reb_ray.sandbox.docker.docker_client import connect
    from reb_ray.sandbox.docker.gpu_check import docker_gpu_problem

    try:
        client = connect(timeout=30)
    except RebRayError:
        return None  # no daemon: every trial there fails as infra anyway, GPU or not
    return docker_gpu_problem(client, image)


def docker_gpu_problems(image: str, timeout_s: float = 180.0, nodes: set[str] | None = None) -> dict[str, str]:
    """{node id: why its Docker cannot give containers GPUs} for the alive nodes with GPUs
    (only those of `nodes` when given: the ones that passed their check).

    Runs one probe container per GPU node, all nodes at once (about a second each). A node
    whose check could not run (it died, Ray failed) is left out: unknown is not a verdict.
    """
    nodes = [n["NodeID"] for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("GPU", 0) > 0
             and (nodes is None or n["NodeID"] in nodes)]
    refs = [_docker_gpu_problem_here.options(scheduling_strategy=_on(node)).remote(image) for node in nodes]
    problems: dict[str, str] = {}
    for node, ref in zip(nodes, refs):
        try:
            problem = ray.get(ref, timeout=timeout_s)
        except (ray.exceptions.RayError, TimeoutError):
            continue
        if problem:
            problems[node] = f"{problem}; see `reb-ray doctor`"
    return problems


@ray.remote(num_cpus=0)
def _remove_attempt_here(sweep_id: str, trial_id: str, attempt: int, run_id: str | None = None) -> list[str]:
    from reb_ray.sandbox.docker.reaper import remove_attempt

    return remove_attempt(sweep_id, trial_id, attempt, run_id=run_id)


def remove_dead_attempt(node_id: str, spec: TrialSpec, timeout_s: float = 120.0, host: str | None = None) -> str:
    """Remove, on node `node_id` (host name `host`), every container labelled with `spec`'s
    sweep, trial, attempt and run (the agent still running inside included), and wait for it.

    When that node's Ray is gone (its raylet died, the machine may live) and `host` is this
    driver's host, the removal runs here: its containers are on this host's Docker daemon
    (raylets sharing a machine, as in tests and simulated clusters). Returns what happened,
    as one line for the attempt's `failure_reason`. Never raises.
    """
    if not any(n["NodeID"] == node_id and n.get("Alive") for n in ray.nodes()):
        return _remove_on_this_host(host, spec) or (
            f"its node {node_id[:12]} is gone; its container goes with the machine or at the node's next reap")
    ref = _remove_attempt_here.options(scheduling_strategy=_on(node_id)).remote(spec.sweep_id, spec.trial_id, spec.attempt,
                                                                                  spec.run_id)
    try:
        removed = ray.get(ref, timeout=timeout_s)
    except (ray.exceptions.RayError, TimeoutError) as exc:
        return _remove_on_this_host(host, spec) or (
            f"removing its container failed ({first_line(exc)}); the node's next reap takes it")
    return _removed(removed)


def _removed(ids: list[str]) -> str:
    return f"removed its container {', '.join(c[:12] for c in ids)}" if ids else "it had no container"


def _remove_on_this_host(host: str | None, spec: TrialSpec) -> str | None:
    """The attempt's containers removed from this host's Docker when its node ran on this host
    (what happened, one line), else None."""
    import socket

    from docker.errors import DockerException

    from reb_ray.errors import RebRayError
    from reb_ray.sandbox.docker.reaper import remove_attempt

    if host is None or host != socket.gethostname():
        return None
    try:
        return f"its node's Ray is gone; {_removed(remove_attempt(spec.sweep_id, spec.trial_id, spec.attempt, run_id=spec.run_id))} on this host"
    except (RebRayError, DockerException) as exc:
        return f"its node's Ray is gone, and removing its container on this host failed ({first_line(exc)})"


@ray.remote(num_cpus=0)
def _reap_here() -> int:
    from reb_ray.sandbox.docker.reaper import reap

    return len(reap())  # containers, then per-attempt images


def reap_on(node_id: str, timeout_s: float = 60.0) -> int | None:
    """Reap orphaned containers and per-attempt images on node `node_id` (a slot worker died
    there); how many were removed, None when the node is gone or the reap failed. Never raises."""
    if not any(n["NodeID"] == node_id and n.get("Alive") for n in ray.nodes()):
        return None
    try:
        return ray.get(_reap_here.options(scheduling_strategy=_on(node_id)).remote(), timeout=timeout_s)
    except (ray.exceptions.RayError, TimeoutError):
        return None
