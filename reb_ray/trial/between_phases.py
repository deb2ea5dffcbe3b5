"""The steps between the agent and probe phases, in one exec where the sandbox allows it.

After the agent phase the harness (1) stops every process the agent left running, (2) reads
the report file, only as a regular file, never through a symlink, at most MAX_REPORT_BYTES,
and (3) records the repository's tracked-files state (`tracked_state`). In a container
sandbox that was two execs and an archive request (three execs and two requests when the agent
changed files); `settle` runs them as one harness script, in that order, so leftovers are
dead before the report is looked at (no process of the agent can swap the report while it is
read) and a trial pays one exec, not three. It does so in a sandbox whose leftovers' kill is a
script run as root inside it (`Sandbox.leftovers_script`: docker, podman). Other providers,
and a sandbox whose script could not run (a container the agent stopped) or whose answer is
not well-formed, take the steps one by one as before (`settle_step_by_step`).

The script's answer is one stream: the killed processes' listing, then sections that each
start with a line `@@<nonce> <what> ...`, the nonce being fresh per call. An agent process
that read the nonce from /proc before it was stopped could print fake sections, but only
before the kill's end marker (it is dead after it), so the LAST end marker starts the part
that only the script wrote; the report travels base64-encoded and tracked paths come from
the repository's commit, so neither can hold a marker line.

What the agent could still do is replace the container's own /bin/sh, stat, head or base64
(as it could already for `kill_leftovers` and git's tracked state): then the answer is what
the agent wants, which it could have put in a regular report file anyway. What protects the
harness is enforced on this side: the answer is read through a bounded sink (ANSWER_LIMIT
bytes, past which the steps run one by one), the exec has a deadline, the bytes are checked
against MAX_REPORT_BYTES here, and the script only sees the container's own files.

`run_between_phases` is the phase as the trial runs it: `settle`, then the report parsed and
its stage row recorded, the agent's changes to tracked files recorded (`record_changes`), the
tracked files put back to the pinned commit (`restore_repo`), and then every tracked file
compared with the pinned commit by content from outside the sandbox and put back where it
differs (`reb_ray.trial.repo_outside`).
"""

from __future__ import annotations

import base64
import binascii
import uuid
from dataclasses import dataclass
from pathlib import Path

from reb_ray.errors import RebRayError
from reb_ray.models.report import MAX_REPORT_BYTES, Report, parse_report
from reb_ray.trial.record import TrialRecorder
from reb_ray.trial.repo_outside import RepoOutside
from reb_ray.trial.repo_restore import restore_pinned, unchanged_by_agent
from reb_ray.trial.repo_state import STATE_SCRIPT, changed_since, parse_state, tracked_state
from reb_ray.sandbox import Sandbox, UnreadableFile
from reb_ray.sandbox.base import DEFAULT_READ_LIMIT, killed_commands

#: Bytes of the script's answer kept at most: the report (base64), the tracked-state listing
#: (bounded like `tracked_state`'s file read) and the leftovers' listing.
ANSWER_LIMIT = DEFAULT_READ_LIMIT + 2 * MAX_REPORT_BYTES
#: Seconds the one exec may take (git status and hashing dominate; tracked_state's bound).
SETTLE_TIMEOUT_S = 120.0

LEFTOVERS_KEPT, LEFTOVER_CHARS = 20, 200  # bounds of `leftover_commands` in the trials row

_KINDS = {"symlink": "a symlink", "fifo": "a FIFO", "directory": "a directory", "other": "not a regular file"}

# $1 nonce, $2 report path, $3 report limit in bytes, $4 repository directory; $STATE is
# reb_ray.trial.repo_state's script. The leftovers' kill first (the sandbox's
# leftovers_script, inline: it spares this shell and its parent, the exec's `timeout`), then the
# report's kind (of the path itself: `-L` before any test that follows links) and, for a
# regular file within the limit, its bytes (at most limit + 1), then the tracked state into a fresh temporary directory,
# whose listing is printed. Standard error is dropped: the exec interleaves it with the answer.
_SETTLE_SCRIPT = r"""
exec 2>/dev/null
nonce=$1 report=$2 limit=$3 repo=$4
KILL
printf '\n@@%s killed-end\n' "$nonce"
if [ -L "$report" ]; then kind=symlink
elif [ -f "$report" ]; then kind=regular
elif [ -p "$report" ]; then kind=fifo
elif [ -d "$report" ]; then kind=directory
elif [ -e "$report" ]; then kind=other
else kind=missing
fi
if [ "$kind" = regular ]; then
  size=$(stat -c %s -- "$report") || size=unknown
  printf '@@%s report regular %s\n' "$nonce" "$size"
  case $size in
    ''|*[!0-9]*) ;;
    *) if [ "$size" -le "$limit" ]; then
         head -c "$((limit + 1))" -- "$report" | base64 || printf '\n@@%s report-failed\n' "$nonce"
       fi ;;
  esac
else
  printf '@@%s report %s\n' "$nonce" "$kind"
fi
dir=$(mktemp -d) || { printf '@@%s state unknown\n@@%s end\n' "$nonce" "$nonce"; exit 0; }
out=$(sh -c "$STATE" repo-state "$repo" "$dir/state")
rc=$?
if [ "$rc" -ne 0 ]; then printf '@@%s state unknown\n' "$nonce"
elif [ "$out" = clean ]; then printf '@@%s state clean\n' "$nonce"
else printf '@@%s state listed\n' "$nonce"; cat -- "$dir/state" || printf '\n@@%s state-failed\n' "$nonce"
fi
rm -rf -- "$dir"
printf '@@%s end\n' "$nonce"
"""


@dataclass
class Settled:
    """What the between-phase steps found.

    `stopped`: the command lines of the processes the agent left running, now killed (None:
    unknown, the sandbox could not tell). `report`: the report file's bytes, or None with
    `report_error` set to FileNotFoundError (no report) or UnreadableFile (not a regular file,
    or over the limit: the agent's invalid_report). `state`: reb_ray.trial.repo_state's tracked
    state after the agent phase (None: unknown). `one_exec`: the steps ran as one exec.
    """

    stopped: list[str] | None
    report: bytes | None
    report_error: FileNotFoundError | UnreadableFile | None
    state: dict[str, str] | None
    one_exec: bool = False


class _Answer:
    """The exec's output sink: keeps at most ANSWER_LIMIT bytes and notes an overflow."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.chunks: list[bytes] = []
        self.size = 0
        self.overflow = False

    def write(self, data: bytes) -> None:
        if self.size + len(data) > self.limit:
            self.overflow = True
            return
        self.chunks.append(data)
        self.size += len(data)


class _Malformed(Exception):
    """The script's answer lacks a section or holds one that does not parse."""


def settle(sandbox: Sandbox, report_path: str, repo_dir: str, limit: int = MAX_REPORT_BYTES) -> Settled:
    """Stop the agent's leftovers, read the report at sandbox path `report_path` (at most
    `limit` bytes, a regular file only) and take the tracked state of the repository at
    `repo_dir`: one exec in a sandbox with a `leftovers_script`, else (or when that fails)
    step by step. Never raises for what the agent did; raises RebRayError only as the steps do
    (the report read of a sandbox whose daemon fails)."""
    if (kill := sandbox.leftovers_script) is not None:
        stopped: list[str] | None = None
        try:
            return _one_exec(sandbox, kill, report_path, repo_dir, limit)
        except _Partial as partial:  # the kill ran and was listed: do not run it again blind
            stopped = partial.stopped
            if partial.timed_out:  # e.g. git hung (the agent replaced it): do not wait twice
                report, error = _read_report(sandbox, report_path, limit)
                return Settled(stopped, report, error, None)
        except (RebRayError, _Malformed):
            pass
        if stopped is not None:
            report, error = _read_report(sandbox, report_path, limit)
            return Settled(stopped, report, error, tracked_state(sandbox, repo_dir))
    return settle_step_by_step(sandbox, report_path, repo_dir, limit)


def settle_step_by_step(sandbox: Sandbox, report_path: str, repo_dir: str, limit: int = MAX_REPORT_BYTES) -> Settled:
    """The same steps as `settle`, each its own sandbox call (kill_leftovers, read_bytes,
    tracked_state), for any provider."""
    stopped = sandbox.kill_leftovers()
    report, error = _read_report(sandbox, report_path, limit)
    return Settled(stopped, report, error, tracked_state(sandbox, repo_dir))


def _read_report(sandbox: Sandbox, report_path: str, limit: int) -> tuple[bytes | None, FileNotFoundError | UnreadableFile | None]:
    try:
        return sandbox.read_bytes(report_path, limit=limit), None
    except (FileNotFoundError, UnreadableFile) as exc:
        return None, exc


class _Partial(Exception):
    """The kill's listing parsed but a later section did not."""

    def __init__(self, stopped: list[str], timed_out: bool = False) -> None:
        super().__init__("partial answer")
        self.stopped = stopped
        self.timed_out = timed_out


def _one_exec(sandbox: Sandbox, kill: str, report_path: str, repo_dir: str, limit: int) -> Settled:
    """The steps as one root exec, the leftovers' kill being the sandbox's script `kill`."""
    nonce = uuid.uuid4().hex
    script = _SETTLE_SCRIPT.replace("\nKILL\n", kill, 1)
    answer = _Answer(ANSWER_LIMIT)
    result = sandbox.exec(["/bin/sh", "-c", script, "settle", nonce, report_path, str(limit), repo_dir],
                          timeout=SETTLE_TIMEOUT_S, env={"STATE": STATE_SCRIPT}, user="root", sink=answer)
    data = b"".join(answer.chunks)
    kill_end = f"\n@@{nonce} killed-end\n".encode()
    cut = data.rfind(kill_end)
    if cut < 0 or result.exit_code is None:
        raise _Malformed("no end of the kill's listing")
    stopped = killed_commands(data[:cut].decode(errors="replace"))
    if answer.overflow or not result.ok:
        raise _Partial(stopped, result.timed_out)
    try:
        report, error, state = _parse_rest(data[cut + len(kill_end):], nonce, report_path, limit)
    except _Malformed:
        raise _Partial(stopped) from None
    return Settled(stopped, report, error, state, one_exec=True)


def _parse_rest(data: bytes, nonce: str, report_path: str, limit: int):
    """The report and state sections after the kill's end marker."""
    sections = _sections(data, f"@@{nonce} ".encode())
    if [words[0] for words, _ in sections] != ["report", "state", "end"]:
        raise _Malformed(f"sections {[w for w, _ in sections]}")
    (report_words, report_body), (state_words, state_body), _ = sections
    report: bytes | None = None
    error: FileNotFoundError | UnreadableFile | None = None
    kind = report_words[1] if len(report_words) > 1 else ""
    if kind == "regular":
        size = int(report_words[2]) if len(report_words) > 2 and report_words[2].isdigit() else None
        if size is None:
            raise _Malformed(f"report size {report_words[2:]}")
        if size > limit:
            return None, UnreadableFile(f"{report_path}: {size} bytes, over the {limit}-byte limit"), _state(state_words, state_body)
        try:
            report = base64.b64decode(report_body, validate=False)
        except (binascii.Error, ValueError) as exc:
            raise _Malformed(f"report: {exc}") from None
        if len(report) > limit:  # grew since its stat: nothing of the agent's runs any more, so a lie
            report, error = None, UnreadableFile(f"{report_path}: more than {limit} bytes, over the {limit}-byte limit")
    elif kind == "missing":
        error = FileNotFoundError(f"{report_path} not found in the sandbox")
    elif kind in _KINDS:
        error = UnreadableFile(f"{report_path}: {_KINDS[kind]}, not a regular file")
    else:
        raise _Malformed(f"report kind {kind!r}")
    return report, error, _state(state_words, state_body)


def _state(words: list[str], body: bytes) -> dict[str, str] | None:
    how = words[1] if len(words) > 1 else ""
    if how == "clean":
        return {}
    if how == "listed":
        return parse_state(body)
    if how == "unknown":
        return None
    raise _Malformed(f"state {how!r}")


def _sections(data: bytes, marker: bytes) -> list[tuple[list[str], bytes]]:
    """Split `data` at lines starting with `marker`: [(the marker line's words, the bytes up to
    the next marker line)]. A `*-failed` word (a step that broke midway) is malformed."""
    found: list[tuple[list[str], bytes]] = []
    lines = data.split(b"\n")
    words: list[str] | None = None
    body: list[bytes] = []
    for line in lines:
        if line.startswith(marker):
            if words is not None:
                found.append((words, b"\n".join(body)))
            words = line[len(marker):].decode(errors="replace").split()
            if not words or words[0].endswith("-failed"):
                raise _Malformed(f"section {words}")
            body = []
        elif words is None:
            if line:
                raise _Malformed("bytes before the first section")
        else:
            body.append(line)
    if words is not None:
        found.append((words, b"\n".join(body)))
    return found


@dataclass(frozen=True)
class BetweenPhases:
    """What the steps between the phases leave for the next ones: the parsed report (None when
    it is missing or invalid: the agent's failure) and its status (`parse_report`'s)."""

    report: Report | None
    report_status: str
    #: the outside comparison of the repository, whose hashes the probe phase starts from
    repo_outside: RepoOutside | None = None


def run_between_phases(rec: TrialRecorder, sandbox: Sandbox, report_path: str, repo_dir: str,
                       baseline: dict[str, str] | None, pinned_checkout: Path | None = None) -> BetweenPhases:
    """Stop everything the agent left running, copy the report out, record repo changes
    (`settle`: one exec in a container sandbox), then put the tracked files back
    to the pinned commit (`restore_pinned`; `pinned_checkout` is the host's checkout).

    Leftovers are stopped first so nothing swaps the report while it is read; a report that is
    not a regular file (a symlink, FIFO, directory) or is over MAX_REPORT_BYTES is the agent's
    invalid_report, never a harness error.
    """
    settled = settle(sandbox, report_path, repo_dir, MAX_REPORT_BYTES)
    stopped = settled.stopped
    part = rec.result.between
    part.leftover_processes = None if stopped is None else len(stopped)
    part.leftover_commands = None if stopped is None else [c[:LEFTOVER_CHARS] for c in stopped[:LEFTOVERS_KEPT]]
    data, written = settled.report, not isinstance(settled.report_error, FileNotFoundError)
    if isinstance(settled.report_error, UnreadableFile):
        status, report, reason = "invalid_report", None, str(settled.report_error)
    else:
        status, report, reason = parse_report(data)
    part.report_status, part.report_python_path = status, report.python_path if report else None
    part.report_source = rec.result.agent.report_source or ("agent_file" if written else "none")
    rec.stage("report", "success" if report else "failure", reason=reason, failure_category=None if report else status,
              raw=data.decode(errors="replace") if data else None)
    record_changes(rec, baseline, settled.state)
    restore_repo(rec, sandbox, repo_dir, baseline, settled.state, pinned_checkout)
    outside = RepoOutside(rec.result.outside, repo_dir, pinned_checkout, rec.result.setup.repo_commit)
    columns = outside.restore(sandbox)  # every tracked file by content, read from outside the sandbox
    if columns is not None:
        part = rec.result.between
        part.repo_restored = columns["repo_restored"]
        part.repo_restored_files = sorted(set(part.repo_restored_files or []) | set(columns["files"]))
    return BetweenPhases(report, status, outside)


def restore_repo(rec: TrialRecorder, sandbox: Sandbox, repo_dir: str, baseline: dict[str, str] | None,
                 after: dict[str, str] | None, pinned_checkout: Path | None) -> None:
    """The stages run the pinned repository: restore the tracked files the agent changed; when
    git in the sandbox cannot (its .git removed or broken), copy the host's pinned checkout over
    the repository and restore again (then which files differed is unknown: null)."""
    commit = rec.result.setup.repo_commit
    keep = unchanged_by_agent(baseline, after)
    columns = restore_pinned(sandbox, repo_dir, commit, keep)
    if columns["repo_restored"] is not True and commit and pinned_checkout is not None:
        try:
            sandbox.put(pinned_checkout, repo_dir)
        except (RebRayError, OSError):
            pass
        else:
            again = restore_pinned(sandbox, repo_dir, commit, keep)
            columns = {"repo_head_moved": columns["repo_head_moved"], "repo_restored": again["repo_restored"],
                       "repo_restored_files": columns["repo_restored_files"]}
    rec.result.between.set(**columns)


def record_changes(rec: TrialRecorder, baseline: dict[str, str] | None, after: dict[str, str] | None) -> None:
    """Record `repo_modified(_files)` from the states before and after the agent phase."""
    if baseline is None or after is None:
        return
    files = changed_since(baseline, after)
    rec.result.between.repo_modified, rec.result.between.repo_modified_files = bool(files), files
