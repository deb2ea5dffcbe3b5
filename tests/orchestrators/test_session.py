"""Starting a local Ray for a sweep: its workers import this checkout's reb_ray, with no job runtime_env.

A new local Ray's raylet is the driver's child, so the path reaches its workers by inheritance;
a job without a runtime_env can then take the workers the raylet starts ahead as its first slot
workers (a runtime_env, even env_vars only, makes every worker of the job a new process).
"""

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_local_ray_workers_import_this_checkout_without_a_job_runtime_env(slow_process, monkeypatch):
    import ray

    from reb_ray.orchestrators.session import init_ray

    monkeypatch.setenv("PYTHONPATH", "/nonexistent-extra")

    @ray.remote(num_cpus=0)
    def where() -> tuple[str, dict, str]:
        import reb_ray.orchestrators.slot_pool as module

        return os.environ.get("PYTHONPATH", ""), ray.get_runtime_context().runtime_env, module.__file__

    init_ray(None)
    try:
        path, runtime_env, module_file = ray.get(where.remote(), timeout=300)
    finally:
        ray.shutdown()
    assert os.environ["PYTHONPATH"] == "/nonexistent-extra"  # the driver's own path is as it was
    assert path.split(os.pathsep) == [str(ROOT), "/nonexistent-extra"]
    assert not runtime_env.get("env_vars")
    assert Path(module_file).resolve().is_relative_to(ROOT)
