"""An in-memory sink with ParquetSink's `write` signature, for tests and library users."""

from __future__ import annotations

import threading

import pyarrow as pa

from reb_ray.results.rows import rows_to_table
from reb_ray.results.schema import STAGES_SCHEMA, TRIALS_SCHEMA


class MemorySink:
    """Keeps written rows as Arrow tables of TRIALS_SCHEMA / STAGES_SCHEMA in this process.

    Unlike ParquetSink it never replaces earlier rows: writing an attempt twice keeps both.
    Safe to call from several threads.
    """

    def __init__(self) -> None:
        """Start empty."""
        self._lock = threading.Lock()
        self._trials: list[pa.Table] = []
        self._stages: list[pa.Table] = []

    def write(self, trial_rows: list[dict], stage_rows: list[dict]) -> None:
        """Validate and store rows like ParquetSink.write: missing keys null, schema_version set.

        Raises ValueError for an unknown key or an unconvertible value; then nothing is stored.
        """
        trials = rows_to_table(trial_rows, TRIALS_SCHEMA)
        stages = rows_to_table(stage_rows, STAGES_SCHEMA)
        with self._lock:
            if trials.num_rows:
                self._trials.append(trials)
            if stages.num_rows:
                self._stages.append(stages)

    @property
    def trials(self) -> pa.Table:
        """All trial rows written so far, in write order, as one TRIALS_SCHEMA table."""
        with self._lock:
            return pa.concat_tables(self._trials) if self._trials else TRIALS_SCHEMA.empty_table()

    @property
    def stages(self) -> pa.Table:
        """All stage rows written so far, in write order, as one STAGES_SCHEMA table."""
        with self._lock:
            return pa.concat_tables(self._stages) if self._stages else STAGES_SCHEMA.empty_table()
