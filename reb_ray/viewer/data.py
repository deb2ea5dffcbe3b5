"""What the viewer reads from a results directory, and how, so that a 100,000-trial run is
browsed without loading it.

Three kinds of read, none of them of a whole dataset:

- The matrix base (`Run.base`): the current attempt (`reb_ray.results.read.latest_attempts`, the
  rule every reader uses) of every trial, only the MATRIX_COLUMNS (identity, statuses, owner,
  category, cost), with `reached`, the highest stage C1..C4 whose status is success (0: none;
  null: the attempt was not scored), the number `analysis.plots.highest_stages` averages.
  About 20 MB at 100,000 trials. It is kept until the trials dataset changes: every request
  lists the part files and compares (name, mtime, size), so a sweep that is running shows its
  new rows at the next request, and a compaction's swap is seen as a change.
- Point lookups (`Run.trial`): one trial's rows. The key column (trial_id) of each file is read
  alone (dictionary-encoded, a few milliseconds per file), and only the row groups that hold a
  match are read with every column, so a trial page costs a few row groups, not the dataset.
- Artifacts (`Run.artifact`): a gzip log under `<output>/artifacts`, by the relative path a row
  names; a path that resolves anywhere else (`..`, an absolute path, a symlink out) is refused.

Every file goes through `reb_ray.results.scan.check_schema` (a foreign or retyped column is
refused naming the file) and is read with the explicit schema (columns an older file lacks read
as null). A file that vanishes under a read (a compaction) makes the read list again.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from reb_ray.trial.artifacts import ARTIFACTS_DIR, artifact_dir
from reb_ray.errors import RebRayError
from reb_ray.results.layout import STAGES_DIR, TRIALS_DIR, part_files
from reb_ray.results.read import latest_attempts
from reb_ray.results.scan import check_schema, scan
from reb_ray.results.schema import STAGES_SCHEMA, TRIAL_STATUSES, TRIALS_SCHEMA

#: The trials columns the matrix, its filters and the sweep list read.
MATRIX_COLUMNS = ["sweep_id", "trial_id", "attempt", "trial_index", "task_id", "agent", "status", "failure_owner",
                  "failure_category", "c0_status", "c1_status", "c2_status", "c3_status", "c4_status", "c5_status",
                  "cost_usd", "finished_at"]
#: Stage names C1..C4 in pyramid order; `reached` is the highest whose status is success.
PYRAMID = ("c1", "c2", "c3", "c4")
PAGE_TASKS = 50  # matrix rows (tasks) per page by default
MAX_PAGE_TASKS = 500
_LISTINGS = 3  # a compaction swapping files under a read: list again, at most this often


class NotFound(RebRayError):
    """A trial, attempt or artifact that is not there (the page answers 404)."""


class Forbidden(RebRayError):
    """A path outside the artifacts directory (the page answers 403)."""


def _retrying(read):
    for listing in range(_LISTINGS):
        try:
            return read()
        except FileNotFoundError:
            if listing == _LISTINGS - 1:
                raise
    raise AssertionError("unreachable")


def reached(table: pa.Table) -> pa.Array:
    """Per row of a trials table: the highest stage n in 1..4 whose `c{n}_status` is success
    (0 when none is), null for an attempt that is not `scored` (its stages say nothing about the
    agent). The same number `analysis.plots.highest_stages` averages over a task's trials."""
    level = pa.array([0] * table.num_rows, pa.int64())
    for n, stage in enumerate(PYRAMID, start=1):
        ok = pc.fill_null(pc.equal(table[f"{stage}_status"], "success"), False)
        level = pc.if_else(ok, n, level)
    scored = pc.fill_null(pc.equal(table["status"], "scored"), False)
    return pc.if_else(scored, level, pa.scalar(None, pa.int64()))


@dataclass
class Base:
    """The current attempt of every trial (MATRIX_COLUMNS, `reached`), as of the trials files `snapshot`."""

    snapshot: tuple
    table: pa.Table  # in no particular order
    written: int  # trial rows written, every attempt
    repeated: dict[str, int]  # "sweep_id\x1ftrial_id" -> attempts written, for trials with several

    def attempts(self, row: dict) -> int:
        """Attempts written for the trial of matrix row `row` (1 unless it was retried or rerun)."""
        return self.repeated.get(f"{row['sweep_id']}\x1f{row['trial_id']}", 1)


@dataclass
class Query:
    """A matrix request: one sweep, optional filters, a page of tasks. Empty means any."""

    sweep: str | None = None
    agent: str = ""
    task: str = ""  # a substring of the task id
    reached: str = ""  # "0".."4", or "none" (not scored)
    status: str = ""
    owner: str = ""  # agent | infra | hardware | none
    category: str = ""
    cost_min: float | None = None
    cost_max: float | None = None
    page: int = 1
    per: int = PAGE_TASKS

    @classmethod
    def parse(cls, params: Any) -> Query:
        """A Query from URL query parameters; a bad number raises RebRayError naming it."""
        def number(name: str, kind):
            raw = (params.get(name) or "").strip()
            if not raw:
                return None
            try:
                return kind(raw)
            except ValueError:
                raise RebRayError(f"{name}={raw!r}: not a number") from None

        page, per = number("page", int) or 1, number("per", int) or PAGE_TASKS
        return cls(sweep=params.get("sweep") or None, agent=params.get("agent", ""), task=params.get("task", ""),
                   reached=params.get("reached", ""), status=params.get("status", ""), owner=params.get("owner", ""),
                   category=params.get("category", ""), cost_min=number("cost_min", float),
                   cost_max=number("cost_max", float), page=max(1, page), per=min(MAX_PAGE_TASKS, max(1, per)))

    def params(self, **change) -> dict:
        """The non-empty parameters of this query with `change` applied (for links)."""
        values = {"sweep": self.sweep, "agent": self.agent, "task": self.task, "reached": self.reached,
                  "status": self.status, "owner": self.owner, "category": self.category,
                  "cost_min": self.cost_min, "cost_max": self.cost_max, "page": self.page,
                  "per": None if self.per == PAGE_TASKS else self.per}
        values.update(change)
        return {k: v for k, v in values.items() if v not in (None, "") and not (k == "page" and v == 1)}


@dataclass
class Matrix:
    """One page of the agent x task matrix: `rows` (task, [cells per agent: trial dicts]),
    the filters' choices, and counts before paging."""

    sweep: str | None
    agents: list[str]
    rows: list[tuple[str, list[list[dict]]]]
    tasks_total: int
    trials_total: int
    pages: int
    page: int
    choices: dict[str, list] = field(default_factory=dict)


class Run:
    """A results directory opened for viewing (module docstring). Thread-safe: the server's
    handlers call it from worker threads."""

    def __init__(self, output_dir: Path) -> None:
        self.output_dir = Path(output_dir)
        if not (self.output_dir / TRIALS_DIR).is_dir():
            raise RebRayError(f"{self.output_dir}: no {TRIALS_DIR}/ dataset here (is it a sweep's --output directory?)")
        self._lock = threading.Lock()
        self._base: Base | None = None
        self._checked: dict[tuple, bool] = {}

    # -- files
    def files(self, dataset: str) -> list[Path]:
        """The part files of `dataset` (trials or stages), in read order."""
        return part_files(self.output_dir / dataset)

    def snapshot(self, dataset: str = TRIALS_DIR) -> tuple:
        """(name, mtime_ns, size) of every part file of `dataset`: equal snapshots, equal rows."""
        out = []
        for path in self.files(dataset):
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            out.append((str(path), st.st_mtime_ns, st.st_size))
        return tuple(out)

    def _check(self, path: Path, schema: pa.Schema) -> None:
        st = path.stat()
        key = (str(path), st.st_mtime_ns, st.st_size)
        if key not in self._checked:
            check_schema(path, schema)
            self._checked[key] = True

    # -- the matrix base
    def base(self) -> Base:
        """The current `Base`, rebuilt when the trials files changed since the last call."""
        snapshot = self.snapshot()
        with self._lock:
            if self._base is not None and self._base.snapshot == snapshot:
                return self._base
            table = _retrying(lambda: scan(self.files(TRIALS_DIR), TRIALS_SCHEMA, MATRIX_COLUMNS))
            key = pc.fill_null(pc.binary_join_element_wise(table["sweep_id"], table["trial_id"], "\x1f"), "\x1e")
            counts = pa.table({"key": key}).group_by("key").aggregate([("key", "count")])
            repeated = counts.filter(pc.greater(counts["key_count"], 1))
            # Only trials written more than once need the current-attempt rule (most have one
            # row); the rule is per trial, so applying it to those rows alone gives its answer.
            if repeated.num_rows:
                again = pc.is_in(key, value_set=repeated["key"])
                table = pa.concat_tables([table.filter(pc.invert(again)), latest_attempts(table.filter(again))])
            table = table.append_column("reached", reached(table))
            many = dict(zip(repeated["key"].to_pylist(), repeated["key_count"].to_pylist()))
            self._base = Base(snapshot, table, sum(counts["key_count"].to_pylist()) if counts.num_rows else 0, many)
            return self._base

    def sweeps(self) -> list[dict]:
        """Per sweep: id, trials (current attempts), scored, infra_error, interrupted, agents,
        tasks, attempts written, and the last finish time."""
        base = self.base()
        out = []
        for sweep in sorted(pc.unique(base.table["sweep_id"]).to_pylist(), key=lambda s: (s is None, s or "")):
            t = base.table.filter(pc.fill_null(pc.equal(base.table["sweep_id"], sweep), False))
            status = dict(zip(*(c.to_pylist() for c in pc.value_counts(t["status"]).flatten())))
            last = pc.max(t["finished_at"]).as_py()
            extra = sum(n - 1 for k, n in base.repeated.items() if k.split("\x1f", 1)[0] == sweep)
            out.append({"id": sweep, "trials": t.num_rows, "scored": status.get("scored", 0),
                        "infra_error": status.get("infra_error", 0), "interrupted": status.get("interrupted", 0),
                        "agents": sorted(a for a in pc.unique(t["agent"]).to_pylist() if a is not None),
                        "tasks": len(pc.unique(t["task_id"])), "attempts": t.num_rows + extra,
                        "last_finished": None if last is None else last.isoformat(timespec="seconds")})
        return out

    # -- the matrix
    def matrix(self, q: Query) -> Matrix:
        """The page of the matrix `q` asks for. Raises NotFound for an unknown sweep."""
        whole = self.base()
        base = whole.table
        sweeps = sorted(s for s in pc.unique(base["sweep_id"]).to_pylist() if s is not None)
        if q.sweep is None and sweeps:
            q.sweep = sweeps[0]
        if q.sweep is not None and q.sweep not in sweeps:
            raise NotFound(f"no sweep {q.sweep!r} here; sweeps: {', '.join(sweeps) or 'none'}")
        t = base.filter(pc.fill_null(pc.equal(base["sweep_id"], q.sweep), False)) if q.sweep else base
        choices = {"agents": sorted(a for a in pc.unique(t["agent"]).to_pylist() if a is not None),
                   "statuses": list(TRIAL_STATUSES), "owners": ["agent", "infra", "hardware", "none"],
                   "categories": sorted(c for c in pc.unique(t["failure_category"]).to_pylist() if c is not None),
                   "reached": ["0", "1", "2", "3", "4", "none"]}
        t = t.filter(self._mask(t, q))
        agents = [q.agent] if q.agent else choices["agents"]
        tasks = pc.unique(t["task_id"]).to_pylist()
        tasks.sort(key=lambda x: (x is None, x or ""))
        pages = max(1, -(-len(tasks) // q.per))
        page = min(q.page, pages)
        shown = tasks[(page - 1) * q.per: page * q.per]
        rows_t = t.filter(pc.is_in(t["task_id"], value_set=pa.array(shown, pa.string()))) if shown else t.slice(0, 0)
        cells: dict[tuple, list[dict]] = {}
        for r in sorted(rows_t.to_pylist(), key=lambda r: (r["trial_index"] is None, r["trial_index"] or 0)):
            r["attempts"] = whole.attempts(r)
            cells.setdefault((r["task_id"], r["agent"]), []).append(r)
        rows = [(task, [cells.get((task, agent), []) for agent in agents]) for task in shown]
        return Matrix(q.sweep, agents, rows, len(tasks), t.num_rows, pages, page, choices)

    @staticmethod
    def _mask(t: pa.Table, q: Query) -> pa.Array:
        mask = pa.array([True] * t.num_rows)

        def both(cond) -> None:
            nonlocal mask
            mask = pc.and_(mask, pc.fill_null(cond, False))

        if q.agent:
            both(pc.equal(t["agent"], q.agent))
        if q.task:
            both(pc.match_substring(t["task_id"], q.task))
        if q.status:
            both(pc.equal(t["status"], q.status))
        if q.owner:
            both(pc.is_null(t["failure_owner"]) if q.owner == "none" else pc.equal(t["failure_owner"], q.owner))
        if q.category:
            both(pc.equal(t["failure_category"], q.category))
        if q.reached:
            if q.reached == "none":
                both(pc.is_null(t["reached"]))
            else:
                try:
                    level = int(q.reached)
                except ValueError:
                    raise RebRayError(f"reached={q.reached!r}: expected 0..4 or none") from None
                both(pc.equal(t["reached"], level))
        if q.cost_min is not None:
            both(pc.greater_equal(t["cost_usd"], q.cost_min))
        if q.cost_max is not None:
            both(pc.less_equal(t["cost_usd"], q.cost_max))
        return mask

    # -- one trial
    def _lookup(self, dataset: str, schema: pa.Schema, sweep: str, trial_id: str) -> pa.Table:
        """Every row of `dataset` with this sweep and trial id, reading only the row groups
        that hold one (module docstring)."""
        def read() -> pa.Table:
            found = []
            for path in self.files(dataset):
                self._check(path, schema)
                pf = pq.ParquetFile(path)
                keys = pf.read(columns=["trial_id"]).column(0)
                hits = pc.indices_nonzero(pc.fill_null(pc.equal(keys, trial_id), False)).to_pylist()
                if not hits:
                    continue
                starts, total = [], 0
                for i in range(pf.metadata.num_row_groups):
                    starts.append(total)
                    total += pf.metadata.row_group(i).num_rows
                groups = sorted({bisect.bisect_right(starts, h) - 1 for h in hits})
                fragment = next(iter(ds.dataset(str(path), schema=schema, format="parquet").get_fragments()))
                part = fragment.subset(row_group_ids=groups)
                flt = (ds.field("trial_id") == trial_id) & (ds.field("sweep_id") == sweep)
                found.append(part.to_table(schema=schema, filter=flt))
            return pa.concat_tables(found) if found else schema.empty_table()

        return _retrying(read)

    def trial(self, sweep: str, trial_id: str, attempt: int | None = None) -> tuple[dict, list[dict], list[dict]]:
        """(the attempt's trials row, every attempt's row by attempt number, the attempt's stage
        rows in the order written). `attempt` None: the current one (`latest_attempts`).
        Raises NotFound naming what is missing."""
        rows = self._lookup(TRIALS_DIR, TRIALS_SCHEMA, sweep, trial_id)
        if rows.num_rows == 0:
            raise NotFound(f"no trial {trial_id!r} in sweep {sweep!r}")
        attempts = sorted(rows.to_pylist(), key=lambda r: r["attempt"] if r["attempt"] is not None else -1)
        if attempt is None:
            row = latest_attempts(rows).to_pylist()[0]
        else:
            chosen = [r for r in attempts if r["attempt"] == attempt]
            if not chosen:
                raise NotFound(f"trial {trial_id!r} has no attempt {attempt}; it has "
                               f"{', '.join(str(r['attempt']) for r in attempts)}")
            row = chosen[-1]
        stages = self._lookup(STAGES_DIR, STAGES_SCHEMA, sweep, trial_id)
        stages = [s for s in stages.to_pylist() if s["attempt"] == row["attempt"]]
        return row, attempts, stages

    def trials_of(self, sweep: str, task: str, agent: str) -> list[dict]:
        """The current attempts (matrix base rows) of `agent` on `task` in `sweep`, by trial index."""
        base = self.base()
        t = base.table
        mask = pc.and_(pc.and_(pc.equal(t["sweep_id"], sweep), pc.equal(t["task_id"], task)), pc.equal(t["agent"], agent))
        rows = sorted(t.filter(pc.fill_null(mask, False)).to_pylist(), key=lambda r: (r["trial_index"] is None, r["trial_index"] or 0))
        for r in rows:
            r["attempts"] = base.attempts(r)
        return rows

    # -- artifacts
    def artifact(self, rel: str) -> Path:
        """The file at `rel` (relative to the output directory) when it lies under
        `<output>/artifacts` once every `..` and symlink is resolved; Forbidden otherwise,
        NotFound when it is not a file."""
        if not rel or "\x00" in rel or Path(rel).is_absolute():
            raise Forbidden(f"path {rel!r}: not a path under {ARTIFACTS_DIR}/")
        root = (self.output_dir / ARTIFACTS_DIR).resolve()
        path = (self.output_dir / rel).resolve()
        if not path.is_relative_to(root):
            raise Forbidden(f"path {rel!r}: not under {ARTIFACTS_DIR}/")
        if not path.is_file():
            raise NotFound(f"no artifact {rel!r}")
        return path

    def other_files(self, row: dict, named: set[str]) -> list[str]:
        """Files of the attempt's artifact directory that no column names, relative paths."""
        directory = self.output_dir / artifact_dir(row["sweep_id"], row["trial_id"], row["attempt"])
        if not directory.is_dir():
            return []
        return [f.relative_to(self.output_dir).as_posix() for f in sorted(directory.rglob("*"))
                if f.is_file() and not f.name.startswith(".") and f.relative_to(self.output_dir).as_posix() not in named]
