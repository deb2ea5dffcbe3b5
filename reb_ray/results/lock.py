"""The run lock: sinks writing into an output directory hold it shared, compaction exclusively.

An advisory `flock(2)` on `<output>/.reb-ray/lock`. The kernel drops it when its holder dies
(SIGKILL included), so a crashed sweep never leaves a run locked. Compaction only runs while
no sink is writing, so it never merges a part file that its writer is still rewriting.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from reb_ray.errors import RebRayError
from reb_ray.results.layout import CONTROL_DIR

LOCK_NAME = "lock"


class RunBusy(RebRayError):
    """Another process holds the run lock in a conflicting mode (e.g. a sweep is still writing)."""


class RunLock:
    """One hold on `<output_dir>/.reb-ray/lock`; `release()` (or the context manager) frees it.

    `exclusive=False` is a writer's hold (many at once); `exclusive=True` is compaction's.
    With `blocking=False` a conflicting hold raises RunBusy naming the directory; with
    `blocking=True` it waits. Raises OSError when the control directory cannot be created.
    """

    def __init__(self, output_dir: Path, exclusive: bool, blocking: bool = True) -> None:
        """Acquire the lock now (see the class docstring)."""
        control = Path(output_dir) / CONTROL_DIR
        control.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = os.open(control / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        try:
            fcntl.flock(self._fd, mode | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(self._fd)
            self._fd = None
            what = "a sweep or another writer is writing results there" if exclusive else "a compaction is running there"
            raise RunBusy(f"{output_dir}: {what} (lock {control / LOCK_NAME}); try again when it ends") from None
        except BaseException:
            os.close(self._fd)
            self._fd = None
            raise

    def release(self) -> None:
        """Free the lock; a second call does nothing."""
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc) -> None:
        self.release()
