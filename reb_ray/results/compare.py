"""Compare two runs' `trials` and `stages` rows on every deterministic column.

The rule: two runs of the same sweep (same suite, agents, trials, settings, machine) by two
versions of reb-ray behave the same when their rows are equal on every column that does not
measure time or name something a run makes up afresh. A refactoring is checked this way: a demo
sweep before and after it, then `scripts/compare_runs.py OUT_A OUT_B`.

Rows are matched by (trial_id, attempt) for `trials` and (trial_id, attempt, stage) for `stages`;
a trial_id is "<agent>/<task_id>/<trial_index>", the same in every sweep, so the key is (task,
agent, trial index, attempt). A row on one side only is a difference, as is a key written twice.
Every other column is compared exactly (floats included: a deterministic float such as a price
is the same number), except the columns in EXCLUDED, each with its reason. Before comparing,
each side's own sweep id and output directory are replaced by placeholders in every string, so
a relative path such as `artifacts/sweep_id=<id>/...` compares by its shape, not by the id.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from reb_ray.errors import RebRayError
from reb_ray.results.read import latest_attempts, read_stages, read_trials
from reb_ray.results.schema import STAGES_SCHEMA, TRIALS_SCHEMA

_TIMING = "a duration or a timestamp: wall-clock time, different on every run"
_HOST = "describes the machine that ran the attempt, not what the attempt did"
_FRESH = "a name or number the run makes up afresh (container, image, port)"
_RACE = "depends on which trial ran first or on when a sampling watch looked, not on the code"
_NODE_DISK = ("the node's disk as this attempt's keep found it: the default budget is a share of its free disk, "
              "and its kept images are every sweep's on the node; " + _HOST)

#: Columns never compared, per dataset, and why. Everything else in the schema is compared.
EXCLUDED: dict[str, dict[str, str]] = {
    "trials": {
        "sweep_id": "each run has its own sweep id (it is replaced by a placeholder in other columns)",
        "node": "the host name of the node that ran the trial; " + _HOST,
        "agent_wall_time_s": _TIMING, "probe_wall_time_s": _TIMING, "trial_wall_time_s": _TIMING,
        "started_at": _TIMING, "finished_at": _TIMING,
        "probe_image_commit_s": _TIMING, "probe_gpu_wait_s": _TIMING,
        "env_capture_s": _TIMING, "env_commit_s": _TIMING, "outside_check_s": _TIMING,
        "c4_port": "the free rendezvous port C4 picked; " + _FRESH,
        "sandbox_network": "the Docker network made for the trial, named with a random suffix; " + _FRESH,
        "env_image_id": "the kept image's id: its layers carry file times; " + _FRESH,
        "env_manifest_digest": "the manifest names the sandbox's paths and file sizes, and a host-process "
                               "sandbox draws its directory afresh; its parts are compared in their own columns",
        "env_manifest_bytes": "the manifest's length, which the host-process sandbox's fresh directory name "
                              "changes as it changes the digest (seen: 8220 and 8221 bytes for the same trial)",
        "env_image_tag": "the kept image's tag names the sweep and attempt; " + _FRESH,
        "probe_image_bytes": "the committed layer's size includes logs and caches written with times; " + _RACE,
        "sandbox_disk_peak_bytes": "the largest writable-layer size a watch sampled every few seconds; " + _RACE,
        "pip_cache_filled": "wheels added to the node's shared pip cache: the first trial to need one adds it; " + _RACE,
        "agent_output_tail": "the agent's own output: pip prints download speeds and times in it",
        "reused_from": "the sweep id of a reused attempt; " + _FRESH,
        "gpu_model": _HOST, "gpu_count": _HOST, "gpu_memory_bytes": _HOST, "gpu_compute_capability": _HOST,
        "gpu_driver_version": _HOST, "cuda_driver_version": _HOST, "container_runtime_version": _HOST,
        "cpu_model": _HOST, "cpu_count": _HOST, "kernel": _HOST,
        "env_disk_budget_bytes": _NODE_DISK, "env_node_kept_bytes": _NODE_DISK, "env_evicted": _NODE_DISK,
    },
    "stages": {
        "sweep_id": "each run has its own sweep id (it is replaced by a placeholder in other columns)",
        "started_at": _TIMING, "duration_s": _TIMING,
        "log_head": "a command's output: pip, pyright and training scripts print times and speeds",
        "log_tail": "a command's output: pip, pyright and training scripts print times and speeds",
        "output_dropped_bytes": "the length of that output, which varies with the times printed in it",
        "side_logs": "tails of files a command wrote besides its output, with the same times in them",
        "raw": "the probe's raw record holds timings (pyright's timeInSec, a stage's elapsed seconds); "
               "its graded verdicts are compared in their own columns",
    },
}

_SCHEMAS = {"trials": TRIALS_SCHEMA, "stages": STAGES_SCHEMA}
_KEYS = {"trials": ("trial_id", "attempt"), "stages": ("trial_id", "attempt", "stage")}
_SWEEP = "<sweep>"
_OUTPUT = "<output>"


@dataclass(frozen=True)
class Difference:
    """One difference: a column's two values under one key, or a row on one side only
    (`column` is None, the missing side's value is None)."""

    dataset: str  # trials | stages
    key: tuple
    column: str | None
    a: Any
    b: Any

    def line(self) -> str:
        key = " ".join(str(part) for part in self.key)
        if self.column is None:
            return f"{self.dataset} {key}: {self.a if self.a is not None else 'absent'} in A, " \
                   f"{self.b if self.b is not None else 'absent'} in B"
        return f"{self.dataset} {key} {self.column}: A={self.a!r} B={self.b!r}"


def compared_columns(dataset: str, ignore: tuple[str, ...] = ()) -> list[str]:
    """The columns of `dataset` compared: its schema, less EXCLUDED and `ignore`, less the key."""
    skip = set(EXCLUDED[dataset]) | set(ignore) | set(_KEYS[dataset])
    return [name for name in _SCHEMAS[dataset].names if name not in skip]


def only_sweep(output: Path, sweep_id: str | None) -> str:
    """`sweep_id`, or the one sweep in `output`'s trials. Raises RebRayError (one line) when the
    directory holds no rows, several sweeps and none was named, or not the named one."""
    ids = sorted(set(read_trials(output, columns=["sweep_id"])["sweep_id"].to_pylist()) - {None})
    if not ids:
        raise RebRayError(f"{output}: no trials rows (is it a sweep's --output directory?)")
    if sweep_id is None:
        if len(ids) > 1:
            raise RebRayError(f"{output}: {len(ids)} sweeps ({', '.join(ids)}); name one with --sweep-a/--sweep-b")
        return ids[0]
    if sweep_id not in ids:
        raise RebRayError(f"{output}: no sweep {sweep_id!r}; it holds {', '.join(ids)}")
    return sweep_id


def _normaliser(output: Path, sweep_id: str):
    pattern = re.compile("|".join(re.escape(s) for s in sorted({sweep_id, str(output.resolve()), str(output)}, key=len,
                                                                  reverse=True)))
    placeholder = {sweep_id: _SWEEP}

    def norm(value: Any) -> Any:
        if isinstance(value, str):
            return pattern.sub(lambda m: placeholder.get(m.group(0), _OUTPUT), value)
        if isinstance(value, list):
            return [norm(v) for v in value]
        if isinstance(value, dict):
            return {k: norm(v) for k, v in value.items()}
        return value
    return norm


def _rows(table: pa.Table, dataset: str, norm, ignore: tuple[str, ...],
          latest_only: bool) -> tuple[dict[tuple, dict], list[tuple]]:
    key_names, columns = _KEYS[dataset], compared_columns(dataset, ignore)
    if latest_only:  # one attempt per trial: matched by trial (and stage) whatever its number
        key_names = tuple(k for k in key_names if k != "attempt")
    by_key: dict[tuple, dict] = {}
    doubled: list[tuple] = []
    for row in table.select(list(key_names) + columns).to_pylist():
        key = tuple(row[k] for k in key_names)
        if key in by_key:
            doubled.append(key)
        by_key[key] = {c: norm(row[c]) for c in columns}
    return by_key, doubled


def _sort_key(key: tuple) -> tuple:
    return tuple((v is None, str(v) if not isinstance(v, int) else "", v if isinstance(v, int) else 0) for v in key)


def compare_runs(output_a: Path, output_b: Path, sweep_a: str | None = None, sweep_b: str | None = None,
                 latest_only: bool = False, ignore: tuple[str, ...] = ()) -> list[Difference]:
    """Every difference between run A's and run B's rows (both datasets), sorted by dataset and
    key; empty when they agree on every compared column.

    `latest_only`: compare only each trial's current attempt (`latest_attempts`) and its stages,
    matched by trial (and stage) whatever the attempt's number, for runs where an infrastructure
    retry on one side only is expected. `ignore`: more columns
    not to compare (for a deliberate change). Raises RebRayError for an output that is not a run
    or an unknown column in `ignore`.
    """
    unknown = sorted(set(ignore) - set(TRIALS_SCHEMA.names) - set(STAGES_SCHEMA.names))
    if unknown:
        raise RebRayError(f"--ignore: unknown column(s) {', '.join(unknown)}; not in the trials or stages schema")
    out: list[Difference] = []
    sides = []
    for output, sweep_id in ((Path(output_a), sweep_a), (Path(output_b), sweep_b)):
        sweep_id = only_sweep(output, sweep_id)
        trials, stages = read_trials(output, sweep_id), read_stages(output, sweep_id)
        if latest_only:
            trials = latest_attempts(trials)
            wanted = {(t, a) for t, a in zip(trials["trial_id"].to_pylist(), trials["attempt"].to_pylist())}
            mask = [(t, a) in wanted for t, a in zip(stages["trial_id"].to_pylist(), stages["attempt"].to_pylist())]
            stages = stages.filter(pa.array(mask, pa.bool_())) if stages.num_rows else stages
        sides.append({"trials": trials, "stages": stages, "norm": _normaliser(output, sweep_id)})
    for dataset in ("trials", "stages"):
        (rows_a, doubled_a), (rows_b, doubled_b) = (_rows(side[dataset], dataset, side["norm"], ignore, latest_only)
                                                      for side in sides)
        out += [Difference(dataset, key, None, "written twice", None) for key in doubled_a]
        out += [Difference(dataset, key, None, None, "written twice") for key in doubled_b]
        for key in sorted(set(rows_a) | set(rows_b), key=_sort_key):
            a, b = rows_a.get(key), rows_b.get(key)
            if a is None or b is None:
                out.append(Difference(dataset, key, None, "present" if a else None, "present" if b else None))
                continue
            out += [Difference(dataset, key, column, a[column], b[column]) for column in a if a[column] != b[column]]
    return out


def count_rows(output: Path, sweep_id: str | None = None) -> tuple[int, int]:
    """(trials rows, stages rows) of the one sweep in `output` (or `sweep_id`)."""
    sweep_id = only_sweep(Path(output), sweep_id)
    return read_trials(output, sweep_id, ["trial_id"]).num_rows, read_stages(output, sweep_id, ["trial_id"]).num_rows


__all__ = ["EXCLUDED", "Difference", "compare_runs", "compared_columns", "count_rows", "only_sweep"]
