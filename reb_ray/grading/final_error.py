"""The error that ended a run: the last Python traceback's exception, or the last fatal line.

A stage log holds warnings as well as the error that ended the run, and warnings often look like
errors (bitsandbytes prints `libbitsandbytes_cpu.so: undefined symbol: ...` and carries on).
`final_errors` finds the error *events* in a log and returns the one that ended the run together
with the events that explain it, latest first:

- a *traceback* event: the exception block of a `Traceback (most recent call last):` (its first
  unindented line, `SomeError: message`, and the message's continuation lines up to a blank line or the next error line);
- a *fatal* event: a line outside any traceback (with the indented lines under it) that says
  the process died or gave up: an exception line printed without a traceback (`SomeError: ...`,
  by a logger or a launcher), `Error:` / `ERROR:` / `fatal error:`, `Segmentation fault`, `Bus error`, `Aborted`, `Killed`,
  `Fatal Python error`, `terminate called after throwing`, NCCL / CUDA / ProcessGroupNCCL
  errors, and the shell's `not found` / `command not found` / `can't open file`.

Lines that call themselves warnings (`Warning`, `WARN`) are never events. The last event is the
final error; before it come (a) the exceptions it was raised from (Python's `During handling of
the above exception` / `The above exception was the direct cause` chains) and (b) when the final
error is a launcher's wrapper (torchrun's `ChildFailedError`, `subprocess.CalledProcessError`),
the error printed before it, which is the child's own. Any other earlier event is only context.
Log prefixes that launchers add per rank (`[rank0]: `, `[default0]:`) are removed first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TRACEBACK = "Traceback (most recent call last):"
_CHAIN = ("During handling of the above exception, another exception occurred:",
          "The above exception was the direct cause of the following exception:")
_RANK_PREFIX = re.compile(r"^\[(?:rank|default)\d+\]:[ ]?", re.M)
_WARNING = re.compile(r"Warning\b|\bWARN(?:ING)?\b")
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Failure)(?::|$)")
_FATAL = re.compile(
    r"^(?:Error|ERROR|FATAL|fatal error|Fatal error)\b:?"
    r"|\bfatal error: |^(?:.*\bline \d+: +\d+ +)?(?:Segmentation fault|Bus error|Aborted|Killed)\b|Fatal Python error"
    r"|terminate called after throwing|NCCL error|\[E [\w.:]*ProcessGroupNCCL|CUDA error: "
    r"|: not found$|command not found|can't open file")
_WRAPPERS = re.compile(r"ChildFailedError|CalledProcessError")
MAX_MESSAGE_LINES = 20


@dataclass(frozen=True)
class ErrorEvent:
    """One error in a log: `kind` "traceback" or "fatal", its `text` (the exception block or the
    line), `start` (character offset in the scanned text) and `chained` (raised while handling,
    or caused by, the event before it)."""

    kind: str
    text: str
    start: int
    chained: bool = False


def strip_prefixes(log: str) -> str:
    """`log` without per-rank launcher prefixes (`[rank1]: `, `[default0]:`)."""
    return _RANK_PREFIX.sub("", log)


def error_events(log: str) -> list[ErrorEvent]:
    """Every error event of `log` (already prefix-stripped) in order of appearance."""
    events: list[ErrorEvent] = []
    lines = log.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    i, chained = 0, False
    while i < len(lines):
        line = lines[i].rstrip("\r\n")
        if line.strip() in _CHAIN:
            chained = True
        elif line.strip() == TRACEBACK:
            i, event = _traceback_event(lines, offsets, i, chained)
            if event is not None:
                events.append(event)
            chained = False
            continue
        elif _is_event_line(line):
            start, message = i, [line]
            while i + 1 < len(lines) and lines[i + 1][:1] in (" ", "\t") and lines[i + 1].strip() \
                    and len(message) < MAX_MESSAGE_LINES:
                i += 1  # its indented details (`  what():  ...` after `terminate called ...`)
                message.append(lines[i].rstrip("\r\n"))
            events.append(ErrorEvent("fatal", "\n".join(message), offsets[start]))
        i += 1
    return events


def _is_event_line(line: str) -> bool:
    return bool(line) and not _WARNING.search(line) and bool(_EXCEPTION_LINE.match(line) or _FATAL.search(line))


def _traceback_event(lines: list[str], offsets: list[int], header: int, chained: bool):
    """(index after the exception block, its event or None) for the traceback at `header`."""
    i = header + 1
    while i < len(lines) and (lines[i][:1] in (" ", "\t") or not lines[i].strip()):
        i += 1  # frames, source lines and carets are indented
    if i >= len(lines):
        return i, None  # cut off before its exception line
    start, message = i, []
    while i < len(lines) and len(message) < MAX_MESSAGE_LINES:
        text = lines[i].rstrip("\r\n")
        if not text.strip() or text.strip() in (TRACEBACK, *_CHAIN) or (message and _is_event_line(text)):
            break  # the message ends; a fatal line after it is an event of its own
        message.append(text)
        i += 1
    return i, ErrorEvent("traceback", "\n".join(message), offsets[start], chained)


def final_errors(log: str) -> list[ErrorEvent]:
    """The error that ended the run and the events that explain it, latest first (see the module
    docstring); [] when `log` holds no error event. Offsets are into `strip_prefixes(log)`."""
    events = error_events(strip_prefixes(log))
    if not events:
        return []
    picked = [events[-1]]
    k = len(events) - 1
    while k > 0 and (events[k].chained or _WRAPPERS.search(events[k].text.split("\n", 1)[0])):
        k -= 1
        picked.append(events[k])
    return picked
