"""The sweep on the driver: expand the trials, check the sweep's identity, run them through an
orchestrator, write the rows, regrade stored attempts. This package never imports Ray (the
orchestrators do) nor the analysis (the CLI hands in what it needs).

`run_sweep` and `SweepResult` are re-exported lazily, so that importing one part of the
sweep (its identity, its expansion) does not load the orchestrators."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reb_ray.sweep.run import SweepResult, run_sweep

__all__ = ["SweepResult", "run_sweep"]


def __getattr__(name: str):
    if name in __all__:
        from reb_ray.sweep import run

        return getattr(run, name)
    raise AttributeError(f"module 'reb_ray.sweep' has no attribute {name!r}")
