"""A sweep's rows in Weights & Biases, logged from the driver.

`WandbLog(project, ...)` starts one W&B run in a child process; `rows()` hands it each
attempt's trials and stages rows as they arrive (after the Parquet sink wrote them: Parquet is
always first and always whole); `finish()` adds summary metrics, plots and the run's Parquet
datasets as an artifact, and waits at most `finish_timeout_s` seconds. A W&B that is slow,
absent or unreachable never fails or hangs the sweep: past the bound the child is killed and a
warning names the local directory, and the sweep exits as it would without W&B.

Why a child process: wandb's own network retries and its atexit hook can block for minutes, and
a thread cannot be stopped; a process can. Rows are the sink's rows, already redacted
(`Redactor`): no sandbox ever talks to W&B and no secret reaches it.

Rows are buffered in the child and logged as one table per key ("trials", "stages") every
`flush_s` seconds (30 by default) or INCREMENT_ROWS rows, so a 250,000-row sweep is 25 tables of
10,000 rows, never one table over W&B's row limit, and a long sweep is visible as it runs. (W&B's
incremental tables keep every row in the one Table object and truncate it past 200,000.) List
and struct cells are stored as JSON text.
"""

from __future__ import annotations

import json
import logging
import multiprocessing as mp
import os
import queue
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: Rows per logged table: wandb.Table.MAX_ROWS (10,000), W&B's bound for one logged table.
INCREMENT_ROWS = 10_000
#: Seconds `finish` waits for W&B by default before it abandons the run (Parquet is already whole).
FINISH_TIMEOUT_S = 60.0


def wandb_mode() -> str:
    """`WANDB_MODE` when set, else "online" when a key is configured (WANDB_API_KEY or a netrc
    entry for the W&B host), else "offline": a sweep never waits on a login prompt."""
    if os.environ.get("WANDB_MODE"):
        return os.environ["WANDB_MODE"]
    if os.environ.get("WANDB_API_KEY"):
        return "online"
    netrc = Path(os.environ.get("NETRC", Path.home() / ".netrc"))
    try:
        return "online" if "api.wandb.ai" in netrc.read_text() else "offline"
    except OSError:
        return "offline"


def _cell(value: Any) -> Any:
    return json.dumps(value, default=str) if isinstance(value, (list, dict, tuple)) else value


def _table_rows(rows: list[dict], columns: list[str]) -> list[list]:
    return [[_cell(r.get(c)) for c in columns] for r in rows]


def _child(messages: mp.Queue, project: str, directory: str, name: str, config: dict, mode: str,
           trial_columns: list[str], stage_columns: list[str], flush_s: float) -> None:
    """The W&B run: reads ("rows", trials, stages) and ("finish", summary, plots, datasets);
    rows are buffered and logged every `flush_s` seconds or INCREMENT_ROWS rows."""
    os.environ.setdefault("WANDB_SILENT", "true")
    import wandb

    run = wandb.init(project=project, dir=directory, name=name, config=config, mode=mode, reinit="create_new")
    pending: dict[str, list[dict]] = {"trials": [], "stages": []}
    columns = {"trials": trial_columns, "stages": stage_columns}

    def flush(force: bool) -> None:
        for key, rows in pending.items():
            while rows and (force or len(rows) >= INCREMENT_ROWS):
                batch, rows[:] = rows[:INCREMENT_ROWS], rows[INCREMENT_ROWS:]
                run.log({key: wandb.Table(columns=columns[key], data=_table_rows(batch, columns[key]))})

    last = time.monotonic()
    while True:
        try:
            kind, *payload = messages.get(timeout=flush_s)
        except queue.Empty:
            kind, payload = "tick", []
        if kind == "rows":
            pending["trials"] += payload[0]
            pending["stages"] += payload[1]
        flush(force=kind != "rows" or time.monotonic() - last >= flush_s)
        if kind != "finish":
            if kind == "tick" or time.monotonic() - last >= flush_s:
                last = time.monotonic()
            continue
        summary, plots, datasets = payload
        for key, value in summary.items():
            run.summary[key] = value
        if plots:
            run.log({f"plots/{name}": wandb.Image(path) for name, path in plots.items()})
        if datasets:
            artifact = wandb.Artifact(f"{name}-results", type="dataset")
            for path in datasets:
                if Path(path).is_dir():
                    artifact.add_dir(path, name=Path(path).name)
            run.log_artifact(artifact)
        run.finish()
        return


class WandbLog:
    """One sweep's W&B run (module docstring). `project` is the W&B project; `directory` where
    W&B keeps its local files (under `directory`/wandb, where the offline run lives); `name` the run name (the sweep id);
    `config` the sweep's resolved configuration (no secrets: SweepConfig never holds a key).

    Never raises after construction; construction raises OSError only when the child cannot
    start. `mode` defaults to `wandb_mode()`.
    """

    def __init__(self, project: str, directory: Path, name: str, config: dict, trial_columns: list[str],
                 stage_columns: list[str], mode: str | None = None, flush_s: float = 30.0) -> None:
        self.mode = mode or wandb_mode()
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        ctx = mp.get_context("spawn")  # no forked copy of Ray's or the sweep's threads
        self._messages: mp.Queue = ctx.Queue()
        self._process = ctx.Process(target=_child, daemon=True, name="reb-ray-wandb",
                                    args=(self._messages, project, str(self.directory), name, config, self.mode,
                                          trial_columns, stage_columns, flush_s))
        self._process.start()

    def rows(self, trials: list[dict], stages: list[dict]) -> None:
        """Queue one batch of rows (returns at once; dropped with a warning if W&B died)."""
        if not self._process.is_alive():
            log.warning("W&B: the logging process is gone (exit %s); rows stay in Parquet only", self._process.exitcode)
            return
        try:
            self._messages.put_nowait(("rows", trials, stages))
        except queue.Full:  # an unbounded queue: only if the process is shutting down
            log.warning("W&B: queue refused %d rows; they stay in Parquet only", len(trials))

    def finish(self, summary: dict[str, Any], plots: dict[str, Path] | None = None,
               datasets: list[Path] | None = None, timeout_s: float = FINISH_TIMEOUT_S) -> bool:
        """Log `summary` (name -> number or text), `plots` (name -> PNG) and `datasets` (dirs
        added to one artifact), then wait at most `timeout_s` seconds. True when W&B finished;
        False (with a warning) when it was abandoned."""
        if self._process.is_alive():
            self._messages.put(("finish", summary, {k: str(v) for k, v in (plots or {}).items()},
                                [str(d) for d in datasets or []]))
            self._process.join(timeout_s)
        if self._process.is_alive():
            self._process.kill()
            self._process.join(5)
            log.warning("W&B did not finish within %.0f s; abandoned (rows are in Parquet; local W&B files in %s)",
                        timeout_s, self.directory)
            return False
        if self._process.exitcode != 0:
            log.warning("W&B logging failed (exit %s); rows are in Parquet; see %s", self._process.exitcode, self.directory)
            return False
        return True
