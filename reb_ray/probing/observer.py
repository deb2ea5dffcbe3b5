"""Host side of a command stage's observer: the kernel's trace of what the stage executed and
opened, kept where the stage's code cannot rewrite it unnoticed.

`arm` writes a fresh 256-bit key into a new directory of the toolbox (through its own exec,
before the stage's command exists) and returns the `Observer`, whose `wrap` puts the stage's
argv under the toolbox's reader (probes/observer/trace_run.py, run by the image's python3 with
-I -S): the reader makes itself non-dumpable, takes the key and removes its file, and runs the
command under the toolbox's strace (reb_ray.probing.toolbox_strace). `collect`, after the
command, reads the reader's output from the host, checks its HMAC under the key (which never
left the host otherwise and never was in any environment), parses the trace
(reb_ray.grading.observed) and resolves, in the sandbox, the real paths of the programs the
witness's processes executed. Its record goes into the stage's witness
record as `observer`, where reb_ray.grading.witness reads it; `reb-ray regrade` re-reads it
from the stage row. Neither function raises: an observer that could not be armed is
`unavailable` (the infrastructure's), one that was armed and left no verified trace is graded
as the agent's (its sandbox ran the reader).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import posixpath
import secrets
from dataclasses import dataclass

from reb_ray.grading.observed import parse_trace, summarize
from reb_ray.probing.facts import facts_env
from reb_ray.probing.toolbox_strace import LOADER, STRACE_DIR
from reb_ray.sandbox import Sandbox

log = logging.getLogger(__name__)

#: Observer record statuses: ok (a verified, complete trace), tampered (the output does not
#: verify under the key, or is gone), incomplete (strace ended before the command's first
#: process did), unavailable (no strace in the toolbox, or it could not be armed).
OK, TAMPERED, INCOMPLETE, UNAVAILABLE = "ok", "tampered", "incomplete", "unavailable"
#: Bytes of trace read back at most.
MAX_TRACE_BYTES = 256 * 1024**2

# $1 the observer's directory, $2 the key file, $3 the key (hex), $4 the strace loader. Prints
# @@OK when the toolbox's strace runs here and the key is in place.
_ARM = r"""
dir=$1 key=$2 hex=$3 loader=$4
[ -x "$loader" ] || { echo "@@NOSTRACE"; exit 0; }
mkdir -p "$dir" && chmod 700 "$dir" || exit 3
(umask 077 && printf '%s' "$hex" > "$key") || exit 3
echo "@@OK"
"""


@dataclass
class Observer:
    """One stage's armed observer: its directory, key file and output in the sandbox, and the
    key (on the host only). `armed` False: the stage runs unobserved (`reason` says why)."""

    armed: bool
    directory: str = ""
    key_file: str = ""
    out: str = ""
    strace_dir: str = ""
    reader: str = ""
    key: bytes = b""
    reason: str | None = None

    def wrap(self, argv: list[str]) -> list[str]:
        """The stage's argv under the reader (unchanged when not armed)."""
        if not self.armed:
            return argv
        return ["/usr/bin/python3", "-I", "-S", self.reader, "--strace", self.strace_dir, "--key", self.key_file,
                "--out", self.out, "--", *argv]


#: Stages that run observed unless REB_RAY_OBSERVE_STAGES names others (comma-separated stage
#: names; "" or "none": none). C4 runs several rank processes under a launcher and is not
#: wrapped yet (docs/grading-witness.md, "The run observed by the kernel's trace").
OBSERVED_STAGES = ("c1", "c3")
OBSERVE_ENV = "REB_RAY_OBSERVE_STAGES"


def observed_stages(environ: dict[str, str] | None = None) -> tuple[str, ...]:
    """The stages that run under the observer on this node (`OBSERVED_STAGES`, or the names in
    $REB_RAY_OBSERVE_STAGES)."""
    value = (os.environ if environ is None else environ).get(OBSERVE_ENV)
    if value is None:
        return OBSERVED_STAGES
    return tuple(n.strip().lower() for n in value.split(",") if n.strip() and n.strip().lower() != "none")


def arm(sandbox: Sandbox, toolbox: str, stage: str | None = None) -> Observer:
    """Prepare one stage's observer in `sandbox` (module docstring); `stage` not among
    `observed_stages()`: not armed. Never raises."""
    if stage is not None and stage not in observed_stages():
        return Observer(False, reason=f"{stage} runs unobserved on this node ({OBSERVE_ENV})")
    token = secrets.token_hex(8)
    directory = posixpath.join(toolbox, "observer-out", token)
    strace_dir = posixpath.join(toolbox, STRACE_DIR)
    hex_key = secrets.token_hex(32)
    observer = Observer(True, directory, posixpath.join(directory, "key"), posixpath.join(directory, "trace"),
                        strace_dir, posixpath.join(toolbox, "probes", "observer", "trace_run.py"), hex_key.encode())
    try:
        res = sandbox.exec(["sh", "-c", _ARM, "arm", directory, observer.key_file, hex_key,
                            posixpath.join(strace_dir, LOADER)], timeout=60, env=facts_env())
    except Exception as exc:  # noqa: BLE001 - a gone sandbox: the stage's own exec fails too
        return Observer(False, reason=f"arm failed: {type(exc).__name__}: {exc}"[:200])
    if "@@NOSTRACE" in res.output:
        return Observer(False, reason="the toolbox has no strace (the node has none)")
    if "@@OK" not in res.output:
        return Observer(False, reason=f"arm exited {res.exit_code}: {res.output.strip()[-200:]}")
    return observer


def verify(data: bytes, key: bytes) -> tuple[dict | None, bytes, str | None]:
    """(header, trace bytes, why not) of the reader's output `data` under `key`: the first line
    is HMAC-SHA256 (hex) over the rest; anything else is a reason."""
    mac, sep, rest = data.partition(b"\n")
    if not sep:
        return None, b"", "the observer's output is empty or cut"
    expected = hmac.new(key, rest, hashlib.sha256).hexdigest().encode()
    if not hmac.compare_digest(mac.strip(), expected):
        return None, b"", "the observer's output does not verify under its key (rewritten in the sandbox)"
    head, _, trace = rest.partition(b"\n")
    try:
        header = json.loads(head)
    except ValueError:
        return None, b"", "the observer's header is not JSON"
    return (header, trace, None) if isinstance(header, dict) else (None, b"", "the observer's header is not an object")


def collect(sandbox: Sandbox, observer: Observer, witness: dict | None, repo_dir: str, duration_s: float | None = None) -> dict:
    """The observer record of one stage (module docstring). Never raises."""
    if not observer.armed:
        return {"status": UNAVAILABLE, "reason": observer.reason}
    record: dict = {}
    try:
        record = _collect(sandbox, observer, witness, repo_dir, duration_s)
        return record
    except Exception as exc:  # noqa: BLE001 - a gone sandbox, an unreadable output: not verified
        log.warning("observer collect failed: %s", exc)
        return {"status": TAMPERED, "reason": f"the observer's output could not be read: {type(exc).__name__}: {exc}"[:300]}
    finally:
        if record.get("realpaths") is None:  # else removed by the exec that resolved them
            try:
                sandbox.exec(["rm", "-rf", "--", observer.directory], timeout=60)
            except Exception:  # noqa: BLE001 - best effort; the toolbox goes with the sandbox
                pass


def _collect(sandbox: Sandbox, observer: Observer, witness: dict | None, repo_dir: str, duration_s: float | None) -> dict:
    try:
        data = sandbox.read_bytes(observer.out, limit=MAX_TRACE_BYTES)
    except Exception as exc:  # noqa: BLE001 - gone, a link, too large: the agent's sandbox did it
        return {"status": TAMPERED, "reason": f"no observer output: {type(exc).__name__}: {str(exc)[:200]}"}
    header, raw_trace, why = verify(data, observer.key)
    if header is None:
        return {"status": TAMPERED, "reason": why, "trace_bytes": len(data)}
    record = {"tracer_pid": header.get("tracer_pid"), "reader_pid": header.get("reader_pid"),
              "root_status": header.get("root_status"), "trace_bytes": len(raw_trace), "duration_s": duration_s}
    if header.get("error") or not header.get("nondumpable"):
        return {**record, "status": INCOMPLETE,
                "reason": f"the observer did not run as armed: {header.get('error') or 'it could not make itself non-dumpable'}"}
    if not header.get("complete") or header.get("truncated"):
        why = "its trace was cut at its limit" if header.get("truncated") else "strace ended before the command's first process did"
        return {**record, "status": INCOMPLETE, "reason": f"the observer's trace is incomplete: {why}"}
    summary = summarize_trace(raw_trace.decode("utf-8", "replace"), (header.get("reader_pid"), header.get("tracer_pid")),
                              witness, repo_dir)
    paths = sorted({p["path"] for rows in summary["pids"].values() for p in rows if p["path"]})
    record.update(summary, status=OK, reason=None, realpaths=_realpaths(sandbox, paths, observer.directory))
    return record


def summarize_trace(text: str, observer_pids: tuple, witness: dict | None, repo_dir: str | None) -> dict:
    """The summary (reb_ray.grading.observed.summarize) of trace `text` for the processes whose
    witness records carry the stage's nonce. Only the files it keeps (under the repository, or
    named by a record) count against the per-program cap of opened files: an interpreter that
    imports torch opens thousands of files before the repository's first one."""
    records = [r for r in (witness or {}).get("records") or [] if isinstance(r, dict)]
    nonce = (witness or {}).get("nonce")
    pids = sorted({r["pid"] for r in records if r.get("nonce") == nonce and isinstance(r.get("pid"), int)})
    interesting = _record_paths(records)
    prefix = (repo_dir or "/nonexistent").rstrip("/") + "/"
    trace = parse_trace(text, observer_pids, keep=lambda path: path.startswith(prefix) or path in interesting)
    return summarize(trace, pids, interesting, repo_dir)


def _record_paths(records: list[dict]) -> set[str]:
    """Absolute files the witness records name (main programs, files installed from the
    repository): the opened files the summary keeps beside those under the repository."""
    out = set()
    for record in records:
        main = record.get("main")
        if isinstance(main, dict) and isinstance(main.get("path"), str):
            out.add(main["path"])
        for entry in record.get("repo_files") or []:
            if isinstance(entry, dict) and isinstance(entry.get("file"), str):
                out.add(entry["file"])
    return out


# $1 the observer's directory (removed); then the paths. Prints "path\0realpath\0" for each
# (realpath empty when it does not resolve).
_REALPATHS = r'''rm -rf -- "$1"; shift
for p in "$@"; do r=$(readlink -f -- "$p" 2>/dev/null) || r=""; printf "%s\0%s\0" "$p" "$r"; done'''


def _realpaths(sandbox: Sandbox, paths: list[str], directory: str) -> dict[str, str | None]:
    """{path: its real path in the sandbox now, or None} for the programs the witness's processes
    executed (the sandbox's readlink: the image's, with the agent's leftovers already stopped);
    the same exec removes the observer's `directory`."""
    res = sandbox.exec(["sh", "-c", _REALPATHS, "realpaths", directory, *paths[:64]], timeout=60, env=facts_env())
    parts = res.output.split("\0")
    out: dict[str, str | None] = {p: None for p in paths}
    for i in range(0, len(parts) - 1, 2):
        if parts[i] in out:
            out[parts[i]] = parts[i + 1] or None
    return out


__all__ = ["INCOMPLETE", "OK", "Observer", "TAMPERED", "UNAVAILABLE", "arm", "collect", "summarize_trace", "verify"]

