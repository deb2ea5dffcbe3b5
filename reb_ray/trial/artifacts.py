"""Full output logs of a trial attempt, kept as gzip files beside the datasets, so a
stage's verdict can be checked against everything its command printed.

The `stages` rows keep only a head and a tail of each output; the whole output of the agent
and of every stage command is streamed, chunk by chunk as it arrives, into a gzip file on the
host where the trial runs (memory stays bounded whatever the command prints):

    <output>/artifacts/sweep_id=<id>/<URI-encoded trial_id>/<attempt>/<stage>.log.gz

An LLM agent's trajectory goes beside them (`TrialLlm`): the CLI's own
transcript `trajectory.jsonl.gz` and the proxy's request log `llm_requests.jsonl.gz`; every
attempt whose agent ran has its trajectory in ATIF, `trajectory.json` (reb_ray.trial.atif_file).
Rows carry the path relative to `<output>` (`stages.log_path`, `trials.agent_log_path`,
`trials.trajectory_path`, `trials.llm_log_path`, `trials.atif_path`). A file
is written under a hidden `.part` name and renamed when its exec ends, so the path in a row
never names a torn file. Each attempt may write at most `budget_bytes` compressed bytes over
all its logs (default 64 MiB, exceeded by at most one compressor buffer); past it a log is cut
and ends with CUT_MARK saying how many bytes were not kept. The agent's credentials are masked
in the stream as in the rows (reb_ray.redact), also when a secret is split across chunks.

The node that runs a trial writes its logs into a staging directory of its own; when the
attempt ends they are either moved into `<output>` on that node (a trial run in-process) or
carried back with the rows (`TrialOutcome.artifacts`, read by `collect`) and written by the
driver with `store` before it writes the rows naming them: a cluster needs no
shared filesystem, and a row never names a file that is not there yet.
"""

from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path
from urllib.parse import quote

from reb_ray.redact import MASK, Redactor
from reb_ray.results.layout import sweep_dir_name  # not parquet_sink: a slot worker never loads pyarrow

ARTIFACTS_DIR = "artifacts"
TRIAL_BUDGET_BYTES = 64 * 1024 * 1024
CUT_MARK = "\n[... reb-ray: log cut here, {dropped} more bytes not kept (artifact budget {budget} bytes per attempt) ...]\n"
#: Fast levels keep up with a chatty command in the reader thread (level 3 compresses logs
#: about 5x at well over 100 MB/s).
COMPRESS_LEVEL = 3


def artifact_dir(sweep_id: str, trial_id: str, attempt: int) -> str:
    """Directory of one attempt's logs, relative to the output directory."""
    return f"{ARTIFACTS_DIR}/{sweep_dir_name(sweep_id)}/{quote(trial_id, safe='')}/{attempt}"


class _CountingFile:
    """The raw file under the gzip stream, counting the compressed bytes written."""

    def __init__(self, path: Path, artifacts: TrialArtifacts) -> None:
        self._f = open(path, "wb")
        self._artifacts = artifacts

    def write(self, data: bytes) -> int:
        self._artifacts.spent += len(data)
        return self._f.write(data)

    def flush(self) -> None:
        self._f.flush()

    def close(self) -> None:
        self._f.close()


class LogArtifact:
    """One output log being written: an OutputSink (reb_ray.sandbox.output) for `Sandbox.exec`.

    `path` is relative to the output directory. `write` never raises: an I/O error stops the
    log and is kept in `error`. Call `close` when the exec returned (idempotent).
    """

    def __init__(self, artifacts: TrialArtifacts, name: str, secrets: list[bytes], suffix: str = ".log.gz") -> None:
        self.path = f"{artifacts.rel_dir}/{name}{suffix}"
        self._final = artifacts.output_dir / self.path
        self._final.parent.mkdir(parents=True, exist_ok=True)
        self._part = self._final.with_name(f".{self._final.name}.part")
        self._artifacts = artifacts
        self._raw = _CountingFile(self._part, artifacts)
        self._gz: gzip.GzipFile | None = gzip.GzipFile(filename="", mode="wb", fileobj=self._raw,  # type: ignore[arg-type]
                                                       compresslevel=COMPRESS_LEVEL, mtime=0)
        self._secrets = secrets
        self._hold = max((len(s) for s in secrets), default=1) - 1  # bytes that may start a split secret
        self._carry = b""
        self.kept_bytes = 0
        self.dropped_bytes = 0
        self.error: str | None = None
        self._closed = False

    @property
    def cut(self) -> bool:
        """True when part of the output was not kept (budget spent or an I/O error)."""
        return self.dropped_bytes > 0

    def write(self, data: bytes) -> None:
        """Append `data` (output bytes) unless the attempt's budget is spent."""
        if self._closed:
            return
        if self._gz is None or self._artifacts.spent >= self._artifacts.budget_bytes:
            self.dropped_bytes += len(data)
            return
        data = self._carry + data
        for secret in self._secrets:
            data = data.replace(secret, MASK.encode())
        # A secret may continue in the next chunk: hold back what could be its beginning.
        cut = len(data) - self._hold if self._hold else len(data)
        data, self._carry = data[:max(cut, 0)], data[max(cut, 0):]
        self._put(data)

    def _put(self, data: bytes) -> None:
        if not data or self._gz is None:
            return
        try:
            self._gz.write(data)
            self.kept_bytes += len(data)
        except OSError as exc:
            self.error = f"{type(exc).__name__}: {exc}"
            self.dropped_bytes += len(data)
            self._gz = None

    def close(self) -> None:
        """Finish the gzip stream (with CUT_MARK if cut) and move it to `path`."""
        if self._closed:
            return
        self._closed = True
        self._put(self._carry)
        self._carry = b""
        try:
            if self._gz is not None:
                if self.dropped_bytes:
                    self._gz.write(CUT_MARK.format(dropped=self.dropped_bytes,
                                                   budget=self._artifacts.budget_bytes).encode())
                self._gz.close()
            self._raw.close()
            os.replace(self._part, self._final)
        except OSError as exc:
            self.error = self.error or f"{type(exc).__name__}: {exc}"
            self._part.unlink(missing_ok=True)

    def __enter__(self) -> LogArtifact:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class TrialArtifacts:
    """The log files of one attempt, sharing one compressed-bytes budget.

    `output_dir` is the sweep's output directory (absolute: trials may run in another working
    directory than the driver's). `log(name)` opens `<name>.log.gz`; a name is a stage name
    ("agent", "c1", ...). Raises OSError when the directory cannot be created.
    """

    def __init__(self, output_dir: Path, sweep_id: str, trial_id: str, attempt: int,
                 redactor: Redactor | None = None, budget_bytes: int = TRIAL_BUDGET_BYTES) -> None:
        self.output_dir = Path(output_dir)
        self.rel_dir = artifact_dir(sweep_id, trial_id, attempt)
        self.budget_bytes = budget_bytes
        self.spent = 0  # compressed bytes written by this attempt's logs so far
        self._secrets = [s.encode() for s in (redactor.secrets if redactor else [])]

    def log(self, name: str, suffix: str = ".log.gz") -> LogArtifact:
        """A new log file `<name><suffix>` (use as a context manager, or close it)."""
        return LogArtifact(self, name, self._secrets, suffix)

    def write(self, name: str, data: bytes, suffix: str = ".jsonl.gz") -> str | None:
        """Writes `data` whole as `<name><suffix>` (masked, within the budget, CUT_MARK past
        it); returns its path relative to the output directory, or None when it could not be
        written (an I/O error: unknown, never a torn file)."""
        try:
            with self.log(name, suffix) as artifact:
                artifact.write(data)
        except OSError:
            return None
        return artifact.path if artifact.error is None else None


def collect(staging: Path) -> dict[str, bytes]:
    """{path relative to the output directory: bytes} of every finished log under `staging`
    (hidden `.part` files of a crashed writer are left out). At most the attempt's budget
    (TRIAL_BUDGET_BYTES) plus one compressor buffer per log. Raises OSError."""
    files = {}
    for path in sorted(Path(staging).rglob("*")):
        if path.is_file() and not path.name.startswith("."):
            files[path.relative_to(staging).as_posix()] = path.read_bytes()
    return files


def store(output_dir: Path, files: dict[str, bytes]) -> None:
    """Write `files` (from `collect`) under `output_dir`, each atomically (a hidden temp name,
    then rename). Refuses a path outside ARTIFACTS_DIR (ValueError): a path comes from a worker.
    Raises OSError."""
    root = Path(output_dir)
    for rel, data in files.items():
        parts = Path(rel).parts
        if not parts or parts[0] != ARTIFACTS_DIR or ".." in parts or Path(rel).is_absolute():
            raise ValueError(f"artifact path {rel!r} is not under {ARTIFACTS_DIR}/")
        final = root / rel
        final.parent.mkdir(parents=True, exist_ok=True)
        part = final.with_name(f".{final.name}.part")
        part.write_bytes(data)
        os.replace(part, final)


#: Row columns that name an artifact (cleared when the attempt's logs are lost).
PATH_COLUMNS = ("log_path", "agent_log_path", "trajectory_path", "llm_log_path", "atif_path", "network_log_path")


def deliver(outcome, staging: Path, output_dir: Path, ship: bool) -> None:
    """End of an attempt: put the logs staged under `staging` in `outcome.artifacts` (`ship`,
    for the driver to `store`) or `store` them in `output_dir` now; then remove `staging`. An
    I/O failure loses the logs, never the rows: their paths are cleared and the trial's
    failure_reason says so. `outcome` is a reb_ray.trial.record.TrialOutcome."""
    try:
        files = collect(staging)
        if ship:
            outcome.artifacts = files
        else:
            store(output_dir, files)
    except OSError as exc:
        outcome.trial["failure_reason"] = (outcome.trial.get("failure_reason") or "") + f" [logs lost: {exc}]"
        for row in (outcome.trial, *outcome.stages):
            for key in PATH_COLUMNS:
                if row.get(key):
                    row[key] = None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def search_log(path: Path, patterns: list[str], chunk_bytes: int = 1024 * 1024) -> dict[str, bool]:
    """{pattern: matched} over the whole of the gzip log at `path`, read in chunks (bounded
    memory; the same streaming search as at run time, reb_ray.sandbox.watch). Raises OSError
    (or gzip.BadGzipFile / EOFError) for a missing or damaged file."""
    from reb_ray.sandbox.watch import PatternWatch

    watch = PatternWatch(patterns)
    with gzip.open(path, "rb") as f:
        while chunk := f.read(chunk_bytes):
            watch.feed(chunk)
    return watch.finish()
