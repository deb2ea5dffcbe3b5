"""The summary split by hardware, when a run mixes kinds of node.

A trial's hardware kind is read from its current attempt's fingerprint columns (the ones every
trials row records, reb_ray.environment.fingerprint): the GPU model(s), how many GPUs the
node has and the CUDA version its driver supports, which together decide what C2..C4 can
show. Rows with none of them (written before the fingerprint, or by a node whose nvidia-smi did
not run) are a kind of their own, "hardware unknown", never merged into another. CPU model and
kernel are recorded but do not split the summary: no stage's rule depends on them.

`split_by_hardware` splits a run's trials by kind (all attempts of a trial go with its current
attempt's kind, so its infra errors stay with it); `analysis.summary.format_by_hardware` prints
the per-agent table once per kind when there is more than one.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from reb_ray.results.read import latest_attempts

#: The fingerprint columns a kind is made of.
KIND_COLUMNS = ("gpu_model", "gpu_count", "cuda_driver_version")
UNKNOWN = "hardware unknown"


def hardware_kind(row: dict) -> str:
    """A row's hardware kind as a label: "2x NVIDIA H100 80GB HBM3, CUDA 12.4", "no GPU" (nvidia-smi
    listed none), or UNKNOWN (no fingerprint). A part that is unknown is left out of the label."""
    model, count, cuda = (row.get(c) for c in KIND_COLUMNS)
    if model is None and count is None and cuda is None:
        return UNKNOWN
    if count == 0:
        return "no GPU"
    label = f"{count}x {model}" if count is not None and model is not None else str(model if model is not None else f"{count} GPU(s)")
    return label + (f", CUDA {cuda}" if cuda is not None else "")


def split_by_hardware(trials: pa.Table) -> dict[str, pa.Table]:
    """{kind: the rows (every attempt) of the trials whose current attempt is of that kind},
    kinds in order of first appearance. A table without the fingerprint columns is one kind,
    UNKNOWN."""
    if not any(c in trials.column_names for c in KIND_COLUMNS):
        return {UNKNOWN: trials} if trials.num_rows else {}
    columns = [c for c in ("sweep_id", "trial_id", "attempt", "status", *KIND_COLUMNS) if c in trials.column_names]
    current = latest_attempts(trials.select(columns)).to_pylist()
    kind_of = {(r["sweep_id"], r["trial_id"]): hardware_kind(r) for r in current}
    keys = zip(trials["sweep_id"].to_pylist(), trials["trial_id"].to_pylist())
    kinds = [kind_of.get(key, UNKNOWN) for key in keys]
    out: dict[str, pa.Table] = {}
    labels = pa.array(kinds)
    for kind in dict.fromkeys(kinds):
        out[kind] = trials.filter(pc.equal(labels, kind))
    return out
