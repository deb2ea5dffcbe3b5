"""Per-task stage outcomes of a run: the one grouping that statistics, cost and failure
analysis share.

Rows: each trial's current scored attempt (`reb_ray.results.read.latest_attempts`), as in
`analysis.scores`. A trial's outcome on a stage is `stage_outcome` (success,
failure = the agent's, hardware, not_run, skipped), except C5, which has no pass/fail status of
its own (`c5_status` success means "audited"): C5 is a success when the report was audited and
holds no over-claim (c5_path + c5_version + c5_capability = 0), a failure when it holds one.

Denominators come from the task spec's applicability, never from the statuses a trial happened
to record, so every agent is rated over the same trials (the rule is `skip_reason`): C0 and C5
apply to every task; C1..C4 as the spec's stages say. With the specs at hand (`tasks=`) they
decide; without them, applicability is read from the rows, where it is recorded on every path
(a stage the spec does not apply is `skipped` in every trial of the task, also when nothing was
probed): a stage applies to a task when any scored trial of the task in the sweep records a
status other than `skipped`, and not when they all record `skipped`. Every scored trial of a
task counts in each stage that applies to the task, so a trial whose own status for it is null
counts as not a success (outcome None, "unknown"), where `analysis.scores` (whose denominators
read the row's own status) leaves it out; rows this version writes always hold the status, so
the two agree. A stage whose status is null in every trial of a task (rows older than the
stage) is unknown for the task and counts nowhere, as in `analysis.scores`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from reb_ray.grading.categories import owner_of
from reb_ray.grading.unmeasured import skip_reason
from reb_ray.models.task import TaskSpec
from reb_ray.results.read import latest_indices


#: stage_outcome values: the agent's success or failure, a failure for lack of hardware, an
#: applicable stage left unmeasured, a stage the task does not apply.
OUTCOMES = ("success", "failure", "hardware", "not_run", "skipped")


def stage_outcome(row: dict, stage: str) -> str | None:
    """What stage `stage` ("c0".."c5", "env_size") of a trials row means for the agent.

    One of OUTCOMES, or None when `{stage}_status` is null. The owner comes from the row's
    `{stage}_failure_category` when the table has one (`owner_of`): hardware -> "hardware"; agent
    -> "failure" (a `not_run` the agent caused included); a `not_run` with another or no owner,
    or an infra-owned failure -> "not_run". A failure without a category is the agent's.
    """
    status = row.get(f"{stage}_status")
    if status in (None, "success", "skipped"):
        return status
    owner = owner_of(row.get(f"{stage}_failure_category"))
    if owner == "hardware":
        return "hardware"
    if owner == "agent" or (status == "failure" and owner is None):
        return "failure"
    return "not_run"


#: The stages statistics are given for, in pyramid order.
STAGES = ("c0", "c1", "c2", "c3", "c4", "c5")
LABELS = {s: s.upper() for s in STAGES}
#: Stages whose applicability the task spec decides (C0 and C5 apply to every task).
SPEC_STAGES = ("c1", "c2", "c3", "c4")

Key = tuple  # (sweep_id, agent)
#: The key under which `RunOutcomes.rows` keeps each row's {stage: outcome} (no trials column has it).
OUTCOME = "_outcome"
#: Outcome codes of `outcome_codes`: the index into CODES (None: no status recorded).
CODES = ("success", "failure", "hardware", "not_run", "skipped", None)
SUCCESS, FAILURE, HARDWARE, NOT_RUN, SKIPPED, UNKNOWN = range(6)


def sort_key(key: Iterable) -> tuple:
    """A sort key for tuples that may hold None (None sorts last)."""
    return tuple((v is None, v if v is not None else "") for v in key)


def c5_lies(row: dict) -> int | None:
    """The row's C5 over-claims: c5_path + c5_version + c5_capability over the known ones
    (None when none is known)."""
    known = [row.get(f"c5_{k}") for k in ("path", "version", "capability")]
    known = [v for v in known if v is not None]
    return sum(known) if known else None


def outcome(row: dict, stage: str) -> str | None:
    """The trial's outcome on `stage` (c0..c5): `stage_outcome`'s, with C5 judged on its
    over-claims (module docstring). None when the row holds no status for the stage."""
    result = stage_outcome(row, stage)
    if stage == "c5" and result == "success" and (c5_lies(row) or 0) > 0:
        return "failure"
    return result


def select(table: pa.Table, names: Iterable[str]) -> pa.Table:
    """The columns `names` that `table` has, in that order; a name the table holds twice reads
    as its last column (as a row dict built from the table would)."""
    last = {field.name: i for i, field in enumerate(table.schema)}
    keep = [n for n in names if n in last]
    return pa.Table.from_arrays([table.column(last[n]) for n in keep], names=keep)


def column(table: pa.Table, name: str, type_: pa.DataType | None = None) -> pa.ChunkedArray:
    """Column `name` of `table`, or nulls of `type_` (default string) when the table lacks it:
    an absent column reads as unknown, as `row.get` does."""
    if name in table.column_names:
        return table[name]
    return pa.chunked_array([pa.nulls(table.num_rows, type_ or pa.string())])


def numbers(table: pa.Table, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(values as float64 or int64 with 0 for null, known mask) of a numeric column (absent: all
    unknown)."""
    values = column(table, name, pa.int64())
    known = pc.is_valid(values).to_numpy(zero_copy_only=False)
    filled = pc.fill_null(values, 0).to_numpy(zero_copy_only=False)
    return filled, known


def equal(table: pa.Table, name: str, value: str) -> np.ndarray:
    """Rows whose column `name` equals `value` (null and absent: False)."""
    return pc.fill_null(pc.equal(column(table, name), value), False).to_numpy(zero_copy_only=False)


def truthy(table: pa.Table, name: str) -> np.ndarray:
    """Rows whose column `name` is true as Python reads it: a non-empty list, a true bool, a
    non-zero number, a non-empty string (null and absent: False)."""
    values = column(table, name)
    if pa.types.is_list(values.type) or pa.types.is_large_list(values.type):
        result = pc.greater(pc.list_value_length(values), 0)
    elif pa.types.is_boolean(values.type):
        result = values
    elif pa.types.is_string(values.type):
        result = pc.greater(pc.utf8_length(values), 0)
    else:
        result = pc.not_equal(values, 0)
    return pc.fill_null(result, False).to_numpy(zero_copy_only=False)


def outcome_codes(table: pa.Table, stage: str, *, judge_c5: bool = True) -> np.ndarray:
    """`outcome` of every row of `table` for `stage`, column-wise: an int8 array of CODES
    indices (UNKNOWN for a null status). The owner of a failure comes from
    `{stage}_failure_category` (`owner_of`, which raises UnknownCategory for a word that is no
    category, as the row rule does). `judge_c5=False` gives `stage_outcome`'s (C5 not judged
    on its over-claims)."""
    n = table.num_rows
    status = column(table, f"{stage}_status")
    codes = np.full(n, UNKNOWN, np.int8)
    success = pc.fill_null(pc.equal(status, "success"), False).to_numpy(zero_copy_only=False)
    skipped = pc.fill_null(pc.equal(status, "skipped"), False).to_numpy(zero_copy_only=False)
    failure = pc.fill_null(pc.equal(status, "failure"), False).to_numpy(zero_copy_only=False)
    rest = pc.is_valid(status).to_numpy(zero_copy_only=False) & ~success & ~skipped
    codes[success] = SUCCESS
    codes[skipped] = SKIPPED
    if rest.any():
        encoded = pc.dictionary_encode(column(table, f"{stage}_failure_category")).combine_chunks()
        index = pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
        words = encoded.dictionary.to_pylist()
        owners = np.zeros(len(words) + 1, np.int8)  # 0: no owner (index -1, the last slot)
        for i in np.unique(index[rest]):
            if i >= 0:
                owners[i] = {"agent": 1, "hardware": 2, "infra": 3}[owner_of(words[i]).value]
        owner = owners[index]
        hardware = rest & (owner == 2)
        agents = rest & ~hardware & ((owner == 1) | (failure & (owner == 0)))
        codes[hardware] = HARDWARE
        codes[agents] = FAILURE
        codes[rest & ~hardware & ~agents] = NOT_RUN
    if stage == "c5" and judge_c5:
        lies = np.zeros(n, np.int64)
        for kind in ("path", "version", "capability"):
            lies += numbers(table, f"c5_{kind}")[0]
        codes[(codes == SUCCESS) & (lies > 0)] = FAILURE
    return codes


def applicability(rows: list[dict], tasks: list[TaskSpec] | None = None) -> dict[tuple, dict[str, bool | None]]:
    """{(sweep_id, task_id): {stage: applies}} for every task of `rows` (current scored
    trials rows), stages STAGES. True / False, or None when unknown (module docstring).
    With `tasks`, a task among them is judged by its spec (`skip_reason`); others by the rows.
    """
    specs = {t.id: t for t in tasks or []}
    seen: dict[tuple, dict[str, set]] = {}
    for row in rows:
        statuses = seen.setdefault((row["sweep_id"], row.get("task_id")), {s: set() for s in SPEC_STAGES})
        for stage in SPEC_STAGES:
            statuses[stage].add(row.get(f"{stage}_status"))
    out: dict[tuple, dict[str, bool | None]] = {}
    for key, statuses in seen.items():
        spec = specs.get(key[1])
        applies: dict[str, bool | None] = {"c0": True, "c5": True}
        for stage in SPEC_STAGES:
            if spec is not None:
                applies[stage] = skip_reason(spec, stage) is None
            elif statuses[stage] - {None, "skipped"}:
                applies[stage] = True
            elif "skipped" in statuses[stage]:
                applies[stage] = False
            else:
                applies[stage] = None
        out[key] = {s: applies[s] for s in STAGES}
    return out


#: The trials columns the analysis reads (the others, e.g. output tails, are never read).
COLUMNS = (
    "sweep_id", "trial_id", "attempt", "status", "trial_index", "task_id", "agent", "failure_owner",
    "failure_category", "c0_status", "c0_missing", "c0_total",
    *(f"c{n}_{c}" for n in range(1, 5) for c in ("status", "failure_category")),
    "c5_status", "c5_path", "c5_version", "c5_capability", "c5_underclaims", "c5_report_faults",
    "input_tokens", "output_tokens", "cost_usd", "agent_wall_time_s", "env_size_bytes", "env_size_apparent_bytes",
    # the shortcuts the probe phase records (analysis.sections.shortcuts)
    "c1_witness", "c3_witness", "c4_witness", "repo_restored_files", "repo_head_moved", "c0_unowned",
    "python_path_kind", "startup_hooks", "suspicious_actions",
)


def codes_of(values: list, order: Iterable | None = None) -> tuple[np.ndarray, list]:
    """(an int64 code per value, the distinct values sorted by `sort_key` of one-tuples, None
    last): code i is the i-th distinct value."""
    distinct = sorted(set(values), key=lambda v: sort_key((v,)))
    index = {v: i for i, v in enumerate(distinct)}
    return np.fromiter((index[v] for v in values), np.int64, len(values)), distinct


def _encode(array: pa.ChunkedArray) -> tuple[np.ndarray, list]:
    """`codes_of` a string column, computed on its distinct values (the dictionary), not per row."""
    encoded = pc.dictionary_encode(array).combine_chunks() if len(array) else None
    if encoded is None:
        return np.zeros(0, np.int64), []
    index = pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    words = encoded.dictionary.to_pylist()
    has_null = bool((index < 0).any())
    distinct = sorted(set(words) | ({None} if has_null else set()), key=lambda v: sort_key((v,)))
    rank = {v: i for i, v in enumerate(distinct)}
    remap = np.array([rank[w] for w in words] + [rank.get(None, -1)], np.int64)
    return remap[index], distinct


@dataclass(frozen=True)
class StageTasks:
    """One (sweep, agent, stage): the tasks it applies to with a scored trial (`tasks`, sorted,
    None last), each task's scored trials `trials` and successes `successes` (int arrays in
    that order), and the outcome counts over those trials: `counts[code]` for CODES."""

    tasks: list
    trials: np.ndarray
    successes: np.ndarray
    counts: np.ndarray

    def per_task(self) -> dict:
        """{task: (trials, successes)}."""
        return dict(zip(self.tasks, zip(self.trials.tolist(), self.successes.tolist())))


class RunOutcomes:
    """A run's current scored trials grouped for analysis, column-wise.

    `table`: the current scored attempts (`latest_attempts`, then scored), the analysis COLUMNS
    the trials table has, in the trials table's order. `order`: their positions sorted by
    (sweep, agent), task and trial_index (None last; ties in table order): the order every
    per-agent sum runs in. `key` / `task`: per row of `table`, its index into `keys()` and into
    `task_names`. `codes`: {stage: `outcome_codes`}. `applies`: {stage: bool per row}, whether
    the stage applies to the row's task (module docstring). `attempts`: every written attempt's
    sweep_id, agent, status and failure_category, with `attempt_key` (index into `keys()`).
    `stage_tasks(key, stage)`: the per-task counts statistics read.
    """

    def __init__(self, trials: pa.Table, tasks: list[TaskSpec] | None = None) -> None:
        trials = select(trials, COLUMNS)
        if "agent" not in trials.column_names:
            raise KeyError("trials table lacks column 'agent'")
        current = trials.take(pa.array(latest_indices(trials), pa.int64()))
        self.table = current.filter(pc.fill_null(pc.equal(current["status"], "scored"), False))
        self.attempts = trials.select([c for c in ("sweep_id", "agent", "status", "failure_category")
                                       if c in trials.column_names])
        self._specs = tasks
        n = self.table.num_rows
        sweeps_all, sweep_names = _encode(self.attempts["sweep_id"])
        agents_all, agent_names = _encode(self.attempts["agent"])
        pairs = sweeps_all * (len(agent_names) + 1) + agents_all
        present = np.unique(pairs)
        keys = [(sweep_names[p // (len(agent_names) + 1)], agent_names[p % (len(agent_names) + 1)]) for p in present]
        # codes are ranks of sort_key, so the pairs' numeric order is keys()' order
        self._keys = keys
        self.attempt_key = np.searchsorted(present, pairs)
        self._key_index = {k: i for i, k in enumerate(keys)}
        sweep_rank = {v: i for i, v in enumerate(sweep_names)}
        agent_rank = {v: i for i, v in enumerate(agent_names)}
        if n:
            s_codes, s_names = _encode(self.table["sweep_id"])
            a_codes, a_names = _encode(self.table["agent"])
            s_map = np.array([sweep_rank[v] for v in s_names], np.int64)
            a_map = np.array([agent_rank[v] for v in a_names], np.int64)
            self.key = np.searchsorted(present, s_map[s_codes] * (len(agent_names) + 1) + a_map[a_codes])
            self.task, self.task_names = _encode(column(self.table, "task_id"))
            index = column(self.table, "trial_index", pa.int64())
            index_null = pc.is_null(index).to_numpy(zero_copy_only=False)
            index_val = pc.fill_null(index, 0).to_numpy(zero_copy_only=False)
            self.order = np.lexsort((np.arange(n), index_val, index_null, self.task, self.key))
        else:
            self.key = np.zeros(0, np.int64)
            self.task, self.task_names = np.zeros(0, np.int64), []
            self.order = np.zeros(0, np.int64)
        self.codes = {stage: outcome_codes(self.table, stage) for stage in STAGES}
        self.applies = self._applicability(tasks)
        self._stage_tasks: dict[tuple, StageTasks] = {}
        self._rows: list[dict] | None = None
        self._trials: dict | None = None

    def _applicability(self, tasks: list[TaskSpec] | None) -> dict[str, np.ndarray]:
        n = self.table.num_rows
        out = {"c0": np.ones(n, bool), "c5": np.ones(n, bool)}
        if not n:
            return {s: np.zeros(0, bool) for s in STAGES}
        sweep, _ = _encode(self.table["sweep_id"])
        group = sweep * (len(self.task_names) + 1) + self.task
        groups, inverse = np.unique(group, return_inverse=True)
        specs = {t.id: t for t in tasks or []}
        spec_of_task = [specs.get(t) for t in self.task_names]
        for stage in SPEC_STAGES:
            code = self.codes[stage]
            ran = np.zeros(len(groups), bool)
            np.logical_or.at(ran, inverse, (code != SKIPPED) & (code != UNKNOWN))
            applies = ran[inverse]
            if specs:
                by_spec = np.array([None if s is None else skip_reason(s, stage) is None for s in spec_of_task], object)
                judged = by_spec[self.task]
                has_spec = np.array([v is not None for v in judged], bool)
                applies = np.where(has_spec, judged.astype(bool), applies)
            out[stage] = applies.astype(bool)
        return {s: out[s] for s in STAGES}

    def keys(self) -> list[Key]:
        """Every (sweep_id, agent) with any written attempt, sorted (None last)."""
        return list(self._keys)

    def agents(self, sweep_id) -> list:
        """The agents of one sweep, sorted."""
        return [a for s, a in self._keys if s == sweep_id]

    def sweeps(self) -> list:
        """The sweeps, sorted (None last)."""
        return sorted({s for s, _ in self._keys}, key=lambda s: sort_key((s,)))

    def has_scored(self, key: Key) -> bool:
        """Whether (sweep_id, agent) has a current scored trial."""
        return key in self._scored_keys

    @property
    def _scored_keys(self) -> set:
        if not hasattr(self, "_scored"):
            self._scored = {self._keys[i] for i in np.unique(self.key).tolist()}
        return self._scored

    def rows_of(self, key: Key) -> np.ndarray:
        """Positions in `table` of the scored trials of `key`, in `order`."""
        i = self._key_index.get(key)
        if i is None:
            return np.zeros(0, np.int64)
        ordered_keys = self.key[self.order]
        lo, hi = np.searchsorted(ordered_keys, [i, i + 1])
        return self.order[lo:hi]

    def stage_tasks(self, key: Key, stage: str) -> StageTasks:
        """StageTasks of (sweep_id, agent) on `stage`. Raises KeyError for an unknown stage."""
        if stage not in STAGES:
            raise KeyError(f"unknown stage {stage!r}: expected one of {', '.join(STAGES)}")
        cached = self._stage_tasks.get((key, stage))
        if cached is None:
            rows = self.rows_of(key)
            rows = rows[self.applies[stage][rows]]
            task = self.task[rows]
            code = self.codes[stage][rows]
            present = np.unique(task)
            trials = np.bincount(np.searchsorted(present, task), minlength=len(present))
            successes = np.bincount(np.searchsorted(present, task), weights=code == SUCCESS,
                                    minlength=len(present)).astype(np.int64)
            cached = StageTasks([self.task_names[t] for t in present.tolist()], trials, successes,
                                np.bincount(code, minlength=len(CODES)))
            self._stage_tasks[(key, stage)] = cached
        return cached

    @property
    def rows(self) -> list[dict]:
        """The current scored trials as row dicts (COLUMNS the table has, plus OUTCOME), in the
        table's order; built on first use."""
        if self._rows is None:
            rows = self.table.to_pylist()
            for stage in STAGES:
                for row, code in zip(rows, self.codes[stage].tolist()):
                    row.setdefault(OUTCOME, {})[stage] = CODES[code]
            self._rows = rows
        return self._rows

    @property
    def trials(self) -> dict[Key, list[dict]]:
        """{(sweep_id, agent): [row dicts in `order`]}; built on first use."""
        if self._trials is None:
            rows = self.rows
            out: dict[Key, list[dict]] = {}
            for i in self.order.tolist():
                out.setdefault(self._keys[self.key[i]], []).append(rows[i])
            self._trials = out
        return self._trials

    @property
    def by_agent(self) -> dict[Key, dict[str, dict]]:
        """{(sweep_id, agent): {stage: {task_id: [outcome per trial]}}}, only tasks where the
        stage applies; built on first use from `rows` (for readers of single outcomes)."""
        out: dict[Key, dict[str, dict]] = {key: {s: {} for s in STAGES} for key in self.trials}
        positions = {id(r): i for i, r in enumerate(self.rows)}
        for key, rows in self.trials.items():
            for row in rows:
                i = positions[id(row)]
                for stage in STAGES:
                    if self.applies[stage][i]:
                        out[key][stage].setdefault(row.get("task_id"), []).append(row[OUTCOME][stage])
        return out


def collect(trials: pa.Table, tasks: list[TaskSpec] | None = None) -> RunOutcomes:
    """Group a trials table (TRIALS_SCHEMA or a subset of its columns, every attempt as
    `read_trials` gives it) into RunOutcomes. Raises KeyError naming a missing identity column."""
    return RunOutcomes(trials, tasks)
