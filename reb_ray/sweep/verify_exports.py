"""`--verify-exports`: after a sweep, export every success and prove it by rebuilding.

For each trial of the sweep whose current attempt is a success (`keep.is_success`: scored, a
command stage C1/C3/C4 passed), not verified before (no record of that sweep, trial and
attempt in `<output>/environments/verifications.jsonl`), `verify_exports` writes the export
(`reb_ray.environment.export`, without the kept image: the rebuild must come from the recipe)
to `<output>/environments/exports/<sweep>/<agent>__<task>__<index>/attempt-<n>/` and verifies
it (`reb_ray.sweep.env_verify.verify`: `docker build --no-cache`, the probe phase with no
agent, each stage compared with the source's). The verification's record goes to the
verifications dataset and so into the source trial's `trial show`.

Where: on the node that built the environment (the row's `node`). The export's wheels come
from that node's package cache (the manifest names the files it held), its FROM image is in
that node's Docker, and the verification must measure on the same kind of node (its GPUs). A
success built on the driver's host is exported and verified here. One built on another node
is, given the cluster (`run_on(host, fn, args)`: `reb_ray.orchestrators.on_node.NodeRunner`,
which `reb-ray sweep --address ... --verify-exports` passes), exported and verified there by
`verify_there`: the driver reads what the export needs of the results store (`read_source`:
the row, the manifest, the stored report, the stages' statuses) and the task, and ships them
as plain data; that node writes the export in a scratch directory of its own, rebuilds and
probes it, and ships back the record and the export directory as one tar archive (wheels and
repository included, so the directory here rebuilds anywhere); the driver writes the directory
under the output and the record into the dataset. Nothing there reads or writes the driver's
output directory: a cluster has no shared filesystem, and a directory of the same path there
is not the output.

Without a runner such a success gets a record `reproducible: not attempted` naming its node
(export and verify it there, or sweep with `--address`); a node that has left the cluster gets
one naming the nodes that are alive, and a failure of the call or of that node one with its
line: one record per success, never an exception for the whole pass. An export that cannot be
written is recorded the same way, with its one-line reason, and what it had written is
removed. Successes are verified one at a time (each rebuild uses its node's CPUs and network).
"""

from __future__ import annotations

import io
import os
import shutil
import socket
import tarfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from reb_ray.environment.keep import is_success
from reb_ray.errors import RebRayError
from reb_ray.results.verifications import append_verification, attempt_key, read_verifications

EXPORTS = "environments/exports"
STAGES = ("c0", "c1", "c2", "c3", "c4", "c5")
#: The scratch directory of an export written and verified on another node (reb_ray.sandbox.scratch).
SCRATCH_PREFIX = "reb-ray-verify-export-"


@dataclass
class VerifiedThere:
    """What `verify_there` ships back to the driver: the verification record and the export
    directory as an uncompressed tar archive, or, when no export could be written or verified
    there, `why` (one line) and nothing else."""

    record: dict | None = None
    archive: bytes = b""
    why: str | None = None


def verified_before(output: Path) -> set[tuple[str, str, int]]:
    """(sweep, trial, attempt) of every record in the output's verifications dataset (a line
    that is not JSON is skipped: an interrupted append)."""
    return {attempt_key(record) for record in read_verifications(output) or []}


def successes(output: Path, sweep_id: str) -> list[dict]:
    """The sweep's current attempts that are successes, in trial order."""
    from reb_ray.results.read import latest_attempts, read_trials

    rows = latest_attempts(read_trials(output, sweep_id)).to_pylist()
    out = []
    for row in rows:
        if is_success(row, [(s, row.get(f"{s}_status")) for s in STAGES]):
            out.append(row)
    return sorted(out, key=lambda r: r["trial_id"])


def export_dir(output: Path, row: dict) -> Path:
    """Where `row`'s export is written under `output` (module docstring)."""
    return Path(output) / EXPORTS / row["sweep_id"] / row["trial_id"].replace("/", "__") / f"attempt-{row['attempt']}"


def _not_attempted(output: Path, row: dict, why: str) -> dict:
    record = {"sweep_id": row["sweep_id"], "trial_id": row["trial_id"], "attempt": row["attempt"],
              "task_id": row["task_id"], "built": None, "reproducible": None, "differs": None,
              "verdict": f"reproducible: not attempted ({why})", "source_agent_wall_time_s": row.get("agent_wall_time_s")}
    append_verification(output, record)
    return record


def verify_exports(output: Path, sweep_id: str, tasks_root: Path | None = None, mirrors: list[Path] | None = None,
                   progress=None, run_on=None) -> list[dict]:
    """Export and verify the sweep's successes not verified before (module docstring); returns
    their records in trial order. `progress(line)` is told of each one as it ends. `run_on(host,
    fn, args)` runs `fn(*args)` on the cluster's node named `host` (a NodeRunner); without it
    only successes built on this host are verified."""
    output = Path(output)
    done = verified_before(output)
    host = socket.gethostname()
    records = []
    for row in successes(output, sweep_id):
        if (row["sweep_id"], row["trial_id"], row["attempt"]) in done:
            continue
        started = time.monotonic()
        node = row.get("node")
        out = export_dir(output, row)
        if node in (None, host):
            record = _verify_here(output, row, out, tasks_root, mirrors)
        elif run_on is None:
            record = _not_attempted(output, row, f"its environment was built on node {node}, not on this "
                                                 f"host {host}: export and verify it there")
        else:
            record = _verify_on(node, run_on, output, row, out, tasks_root, mirrors)
        record["verify_s"] = time.monotonic() - started
        records.append(record)
        if progress is not None:
            where = f" on {record['verified_on']}" if record.get("verified_on") not in (None, host) else ""
            progress(f"{row['trial_id']} attempt {row['attempt']}{where}: {record['verdict']}" + _ratio(record))
    return records


def _verify_here(output: Path, row: dict, out: Path, tasks_root: Path | None, mirrors: list[Path] | None) -> dict:
    """Export and verify on this host; the record (verify appends it to the dataset)."""
    from reb_ray.environment.export import export
    from reb_ray.sweep.env_verify import verify

    shutil.rmtree(out, ignore_errors=True)  # an earlier run's, interrupted before its record
    try:
        export(output, row["trial_id"], out, attempt=row["attempt"], sweep_id=row["sweep_id"],
               tasks_root=tasks_root, mirrors=mirrors or [])
    except RebRayError as exc:
        shutil.rmtree(out, ignore_errors=True)  # what the failed export wrote
        return _not_attempted(output, row, f"export failed: {exc}")
    try:
        record = verify(out, tasks_root=tasks_root, mirrors=mirrors)
    except RebRayError as exc:
        shutil.rmtree(out, ignore_errors=True)
        return _not_attempted(output, row, f"verification failed: {exc}")
    record["export"] = str(out)
    return record


def _verify_on(node: str, run_on, output: Path, row: dict, out: Path, tasks_root: Path | None,
               mirrors: list[Path] | None) -> dict:
    """Export and verify on `node` through `run_on` (module docstring); the record, appended
    here to the dataset, its export directory written here under `out`."""
    from reb_ray.environment.export import read_source
    from reb_ray.suite.load import find_task
    from reb_ray.sweep.env_verify import append_record, write_record

    try:
        source = read_source(output, row["trial_id"], row["attempt"], row["sweep_id"])
        task = find_task(row["suite"], row["task_id"], tasks_root, "place its repository")
    except RebRayError as exc:
        return _not_attempted(output, row, f"export failed: {exc}")
    try:
        there = run_on(node, verify_there, (source, task, tasks_root, list(mirrors or [])))
    except RebRayError as exc:  # NodeGone: the line names the alive nodes
        return _not_attempted(output, row, _one_line(exc))
    except Exception as exc:  # noqa: BLE001 - that node's trouble is this success's record, not the pass's end
        return _not_attempted(output, row, f"export and verification on {node} failed: {_one_line(exc)}")
    if there.why is not None:
        return _not_attempted(output, row, there.why)
    shutil.rmtree(out, ignore_errors=True)  # an earlier run's, interrupted before its record
    try:
        unpack(there.archive, out)
    except RebRayError as exc:
        return _not_attempted(output, row, f"verified on {node}, but its export could not be stored here: {exc}")
    record = dict(there.record, export=str(out.resolve()))
    write_record(out, record)  # verification.json names the directory here, not the scratch one there
    append_record(output, record)
    return dict(record, export=str(out))


def verify_there(source, task, tasks_root: Path | None, mirrors: list[Path]) -> VerifiedThere:
    """Runs on the node that built the environment (`run_on`): write the export of `source`
    (an ExportSource read by the driver) with this node's wheels and the repository placed here
    from `task`, rebuild and probe it (`verify`, not appending: the driver does), and return
    the record with the export directory's bytes. The scratch directory is removed on every
    path; nothing of the driver's output directory is touched."""
    from reb_ray.environment.export import write_export
    from reb_ray.sandbox.scratch import make_scratch
    from reb_ray.sweep.env_verify import verify

    here = socket.gethostname()
    scratch = make_scratch(SCRATCH_PREFIX)
    try:
        out = scratch / "export"
        try:
            write_export(source, out, tasks_root=tasks_root, mirrors=mirrors, task=task)
        except RebRayError as exc:
            return VerifiedThere(why=f"export failed on {here}: {exc}")
        try:
            record = verify(out, tasks_root=tasks_root, mirrors=mirrors, task=task, append=False)
        except RebRayError as exc:
            return VerifiedThere(why=f"verification failed on {here}: {exc}")
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            tar.add(out, arcname=".")
        return VerifiedThere(record=record, archive=buffer.getvalue())
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def unpack(archive: bytes, out: Path) -> None:
    """Write the export directory shipped as `archive` to `out` (which must not exist): unpacked
    beside it under a hidden name, then renamed, so `out` is whole or absent. A member that
    would land outside `out` (an absolute path, `..`, a device) is refused: the bytes come from
    another machine. Raises RebRayError with one line; what was unpacked is removed."""
    out = Path(out)
    part = out.with_name(f".{out.name}.part-{uuid.uuid4().hex[:8]}")
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as tar:
            for member in tar.getmembers():
                name = PurePosixPath(member.name)
                if name.is_absolute() or ".." in name.parts or not (member.isfile() or member.isdir() or member.issym()):
                    raise RebRayError(f"the shipped export holds {member.name!r}: not a file inside the export")
            # The "tar" filter also refuses a file written through a link out of the directory.
            extra = {"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}
            tar.extractall(part, **extra)
        part.parent.mkdir(parents=True, exist_ok=True)
        os.replace(part, out)
    except (OSError, tarfile.TarError) as exc:
        shutil.rmtree(part, ignore_errors=True)
        raise RebRayError(f"{out}: {type(exc).__name__}: {exc}") from None
    except RebRayError:
        shutil.rmtree(part, ignore_errors=True)
        raise


def _one_line(exc: BaseException) -> str:
    """A failure as one line: a RebRayError's own message, else the exception's type and the
    last line of its text (a remote task's error text ends with the error that ended it)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if isinstance(exc, RebRayError) and len(lines) == 1:
        return lines[0][:500]
    if len(lines) > 1:
        return lines[-1][:500]
    return f"{type(exc).__name__}: {lines[0][:500]}" if lines else type(exc).__name__


def _ratio(record: dict) -> str:
    """" (rebuild 21.0 s = 0.55x the agent phase's 38.2 s)", or "" when either is unknown."""
    build, source = record.get("build_s"), record.get("source_agent_wall_time_s")
    if not build or not source:
        return ""
    return f" (rebuild {build:.1f} s = {build / source:.2f}x the agent phase's {source:.1f} s)"
