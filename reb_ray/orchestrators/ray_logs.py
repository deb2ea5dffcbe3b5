"""Ray's own messages in the driver go to the sweep's log, never to the user's terminal.

The driver's terminal shows reb-ray's progress, node lines and summary only. Ray writes two
kinds of text there on its own: log records of its `ray` logger (its token-authentication
notice, start-up and shutdown notes), which Ray hands to a stderr handler of its own when it is
imported, and the cluster's error messages (a worker that died, an actor that could not be
restarted), which a driver thread of Ray prints to stdout as `(raylet) ...` paragraphs whatever
`log_to_driver` says. `route_ray_output` sends both, from then on in this process, to one file:
the sweep's log (`<output>/.reb-ray/logs/sweep-<id>.log`), each line with its UTC time. The
infra rows and the node lines already say what a dead worker means for the sweep; Ray's own
paragraph is evidence for whoever reads the log.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import threading
from pathlib import Path

_lock = threading.Lock()
_target: dict[str, Path | None] = {"path": None}
_MARK = "_reb_ray_sweep_log"


class _SweepLogHandler(logging.Handler):
    """Appends each record to the current sweep log (one open per record: a sweep's log may move
    to the next sweep's in the same process, and records are rare)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            _append(f"ray {record.levelname.lower()} {record.name}: {record.getMessage()}")
        except Exception:  # noqa: BLE001  a log line must never fail the sweep
            self.handleError(record)


def _append(text: str) -> None:
    path = _target["path"]
    if path is None:
        return
    stamp = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    lines = [line for line in text.splitlines() if line.strip()] or [""]
    with _lock:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as f:
            f.writelines(f"{stamp} {line}\n" for line in lines)


def _to_sweep_log(data: dict, ignore_prefix: bool = False) -> None:
    """Ray's `print_to_stdstream`, writing to the sweep log: `(raylet) line` for the cluster's
    error messages, `(pid=N) line` for a worker's output."""
    who = data.get("pid")
    prefix = f"({who})" if who in ("raylet", "autoscaler") else f"(pid={who})"
    try:
        _append("\n".join(f"{prefix} {line}" for line in data.get("lines") or []))
    except OSError:
        pass


def route_ray_output(path: Path) -> None:
    """From now on, Ray's log records and error paragraphs in this process go to `path` (the
    sweep log), not to the terminal. Idempotent; a later call moves them to its own path.
    `ray.init` clears the `ray` logger's handlers: call this again after it (`starting_ray`
    covers the records of the start itself). Imports Ray."""
    import ray._private.worker as ray_worker

    _target["path"] = Path(path)
    ray_logger = logging.getLogger("ray")
    for handler in list(ray_logger.handlers):
        if not getattr(handler, _MARK, False):
            ray_logger.removeHandler(handler)  # Ray's own stderr handler
    if not any(getattr(h, _MARK, False) for h in ray_logger.handlers):
        handler = _SweepLogHandler(logging.INFO)
        setattr(handler, _MARK, True)
        ray_logger.addHandler(handler)
    ray_logger.propagate = False
    ray_worker.print_to_stdstream = _to_sweep_log  # read at call time by Ray's error listener thread


@contextlib.contextmanager
def starting_ray(path: Path):
    """Around `ray.init`: the records Ray logs while it starts (its token-authentication notice)
    go to `path` too. `ray.init(configure_logging=False)` leaves the `ray` logger without a
    handler while it starts, so Python hands those records to `logging.lastResort`, which
    prints to stderr; for that moment `lastResort` writes Ray's records to the sweep log (and
    everyone else's to stderr, as before). Afterwards the `ray` logger has the sweep log's
    handler again."""
    route_ray_output(path)
    original = logging.lastResort
    logging.lastResort = _StartHandler(original)
    try:
        yield
    finally:
        logging.lastResort = original
        route_ray_output(path)


class _StartHandler(logging.Handler):
    """`logging.lastResort` while Ray starts: Ray's records to the sweep log, others to `fallback`."""

    def __init__(self, fallback: logging.Handler | None):
        super().__init__(logging.INFO)
        self.fallback = fallback

    def emit(self, record: logging.LogRecord) -> None:
        if record.name == "ray" or record.name.startswith("ray."):
            try:
                _append(f"ray {record.levelname.lower()} {record.name}: {record.getMessage()}")
            except Exception:  # noqa: BLE001  a log line must never fail the sweep
                self.handleError(record)
        elif self.fallback is not None and record.levelno >= self.fallback.level:
            self.fallback.handle(record)
