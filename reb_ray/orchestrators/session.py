"""Joining Ray from the driver: the one place a sweep starts or joins a cluster."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def init_ray(address: str | None, secrets: list[str] = (), log_path: Path | None = None) -> None:
    """Joins the cluster at `address`, or starts a local Ray (none given). The provider key
    variables and `secrets` are out of the environment while Ray starts: its head processes
    are this process's children and its workers theirs, so none inherits a key
    (`keys.scrubbed`). Ray's own messages go to `log_path`, the sweep log, never to the
    terminal (`route_ray_output`)."""
    import ray

    from reb_ray.llm.keys import scrubbed
    from reb_ray.orchestrators.ray_logs import route_ray_output, starting_ray

    if log_path is not None:
        route_ray_output(log_path)
    if ray.is_initialized():
        return
    # Workers must import reb_ray from the same place as the driver (a source checkout too).
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    # Joining a cluster, the job's runtime_env carries the path to the nodes' workers. A new local Ray's
    # raylet is this process's child: its workers inherit the path from it, and a job without a
    # runtime_env can take the workers the raylet starts ahead (one per CPU) as its first slot workers,
    # instead of starting a process for each.
    runtime_env = {"env_vars": {"PYTHONPATH": path}} if address else None
    # No --address means a new local Ray, never whatever cluster this machine happens to run
    # (Ray's own default for address=None is to join it).
    with scrubbed(secrets), _environ({} if address else {"PYTHONPATH": path}), \
            (starting_ray(log_path) if log_path is not None else contextlib.nullcontext()):
        ray.init(address=address or "local", include_dashboard=False, log_to_driver=False, configure_logging=False,
                 runtime_env=runtime_env)


@contextlib.contextmanager
def _environ(values: dict[str, str]):
    """`values` in this process's environment inside the block (what the processes it starts inherit), restored after."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
