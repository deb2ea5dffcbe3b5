"""Joining Ray from the driver: the one place a sweep starts or joins a cluster."""

from __future__ import annotations

import os


def init_ray(address: str | None, secrets: list[str] = ()) -> None:
    """Joins the cluster at `address`, or starts a local Ray (none given). The provider key
    variables and `secrets` are out of the environment while Ray starts: its head processes
    are this process's children and its workers theirs, so none inherits a key
    (reb_ray/llm/keys.py)."""
    import ray

    from reb_ray.llm.keys import scrubbed

    if ray.is_initialized():
        return
    # Workers must import reb_ray from the same place as the driver (a source checkout too).
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {"env_vars": {"PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}}
    # No --address means a new local Ray, never whatever cluster this machine happens to run
    # (Ray's own default for address=None is to join it).
    with scrubbed(secrets):
        ray.init(address=address or "local", include_dashboard=False, log_to_driver=False, configure_logging=False,
                 runtime_env=env)
