"""A task's helpers: the files next to its spec that drive its entrypoint at minimal size.

`tasks/<suite>/<task-id>/helpers/` holds what the paper's harness generated or wrote per
repository (a tiny config, a one-sample dataset generator, a wrapper script; ResearchEnvBench
release, per-repo `benchmark_scripts/`). Like the rest of the probe toolbox it enters the
sandbox only in the probe phase, so the agent never sees it; stage
commands find it at `$REB_RAY_HELPERS`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from reb_ray.errors import InfraError
from reb_ray.models.task import HELPERS_DIR, TaskSpec

HELPERS_VAR = "REB_RAY_HELPERS"


def install_task_helpers(sandbox, task: TaskSpec, toolbox: str) -> dict[str, str]:
    """Copy `task`'s helpers/ directory into the installed toolbox at `toolbox` (a sandbox
    path) and return the stage environment naming it: {"REB_RAY_HELPERS": path}, or {} for a
    task without helpers. Raises InfraError(infra_toolbox) when the copy fails.
    """
    source = task.task_dir / HELPERS_DIR
    if not source.is_dir():
        return {}
    target = f"{toolbox}/task-helpers"
    try:
        if sandbox.capabilities.host_paths:
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            sandbox.put(Path(source), target)
    except Exception as exc:  # a gone sandbox or a full disk: never the agent's score
        raise InfraError("infra_toolbox", f"cannot install the helpers of {task.id}: {type(exc).__name__}: "
                                          f"{str(exc)[:200]}") from None
    return {HELPERS_VAR: target}
