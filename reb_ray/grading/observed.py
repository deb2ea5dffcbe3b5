"""The kernel's account of a command stage: strace's trace, parsed (pure functions).

The stage's command ran under `strace -f --seccomp-bpf -y` (probes/observer/trace_run.py), which
wrote one line per traced system call: what each process executed (`execve`, `execveat`), what
it opened (`open`, `openat`, `openat2`; `-y` prints the file the kernel really opened after the
`=`, and the directory a relative path was resolved from, the process's working directory for
`AT_FDCWD`), and every call that could reach the observer itself (`ptrace`, `process_vm_*`,
`pidfd_*`, `kill`, `tkill`, `tgkill`, `io_uring_setup`). `parse_trace` turns that text into, per
process, the programs it executed in order, each with its argv, working directory and the files
it opened while running that program, and the calls that reached for the observer (its reader
or strace, by PID, or the observer's own files). The rule that reads this is in
reb_ray.grading.witness.
"""

from __future__ import annotations

import ast
import posixpath
import re
from dataclasses import dataclass, field
from typing import Callable

#: Programs kept per process, and files kept per program (the rest is counted). With `keep`
#: (parse_trace) the cap counts only the files kept: an interpreter of a real ML stage opens
#: thousands of files of its site-packages (torch, transformers) before the repository's, and
#: a cap over every open left the repository's files out of the trace.
MAX_EXECS = 8
MAX_OPENED = 400
#: Lines kept of the calls that reached for the observer.
MAX_REACHED = 10

_LINE = re.compile(r"^(\d+)\s+(.*)$")
_RESUMED = re.compile(r"^<\.\.\. (\w+) resumed>(.*)$")
_CALL = re.compile(r"^(\w+)\((.*)\)\s+=\s+(-?\d+|\?)(.*)$")
_FD_PATH = re.compile(r"^(-?\d+)<(.*)>(?: ?\(deleted\))?$")
_PROC = re.compile(r"^/proc/(\d+)(?:/task/\d+)?/(fd|fdinfo|mem|map_files|environ|root|cwd|exe)(?:/|$)")
_REACH_CALLS = ("ptrace", "process_vm_readv", "process_vm_writev", "pidfd_open", "kill", "tkill", "tgkill")
#: Marks of the observer's files: its FIFO's directory, its key and output directory.
OBSERVER_MARKS = (".reb-ray-trace-", "/observer-out/")


@dataclass
class Program:
    """One program a process executed: the path it named, its argv, the working directory it
    opened files from, and the files it opened (resolved by the kernel) while it ran."""

    path: str
    argv: list[str] | None
    cwd: str | None = None
    opened: list[str] = field(default_factory=list)
    opened_total: int = 0

    def as_dict(self) -> dict:
        return {"path": self.path, "argv": self.argv, "cwd": self.cwd, "opened": self.opened,
                "opened_total": self.opened_total}


@dataclass
class Trace:
    """A parsed trace: per PID its programs, exits and the calls that reached for the observer."""

    programs: dict[int, list[Program]] = field(default_factory=dict)
    exits: dict[int, str] = field(default_factory=dict)
    reached: list[str] = field(default_factory=list)
    reached_total: int = 0
    lines: int = 0
    unparsed: int = 0
    keep: Callable[[str], bool] | None = field(default=None, repr=False)  # parse_trace's `keep`


def _strings(text: str) -> list[str]:
    """The C strings strace printed (escapes decoded; a truncated `"..."...` keeps its part)."""
    out = []
    for match in re.finditer(r'"((?:[^"\\]|\\.)*)"', text):
        try:
            out.append(ast.literal_eval('b"' + match.group(1) + '"').decode("utf-8", "replace"))
        except (ValueError, SyntaxError):
            out.append(match.group(1))
    return out


def _split_args(args: str) -> list[str]:
    """Top-level comma-separated arguments (brackets, braces and strings kept whole)."""
    parts, depth, quoted, escaped, current = [], 0, False, False, []
    for ch in args:
        if quoted:
            current.append(ch)
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                quoted = False
            continue
        if ch == '"':
            quoted = True
        elif ch in "[{(<":
            depth += 1
        elif ch in "]})>":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
            continue
        current.append(ch)
    if current:
        parts.append("".join(current).strip())
    return parts


def _fd_path(arg: str) -> tuple[str | None, str | None]:
    """(fd text, path) of a `-y`-decoded descriptor argument such as `AT_FDCWD</repo>`."""
    match = re.match(r"^([\w-]+)<(.*)>$", arg)
    return (match.group(1), match.group(2)) if match else (arg, None)


def parse_trace(text: str, observer_pids: tuple[int, ...] = (), keep: Callable[[str], bool] | None = None) -> Trace:
    """Parse strace's `-f -y` output (see the module docstring). `observer_pids`: the reader's
    and strace's PIDs; a call naming one of them, or a /proc entry of one, or an observer file,
    is listed in `reached`. `keep`: which opened files (resolved paths) a program keeps, up to
    MAX_OPENED of them (None: every file, the first MAX_OPENED); every open is counted in
    `opened_total` either way."""
    trace = Trace(keep=keep)
    pending: dict[int, str] = {}
    mine = {str(p) for p in observer_pids if p}
    for raw in text.splitlines():
        trace.lines += 1
        match = _LINE.match(raw)
        if not match:
            trace.unparsed += bool(raw.strip())
            continue
        pid, body = int(match.group(1)), match.group(2)
        if body.endswith("<unfinished ...>"):
            pending[pid] = body[: -len("<unfinished ...>")].rstrip()
            continue
        resumed = _RESUMED.match(body)
        if resumed:
            body = pending.pop(pid, resumed.group(1) + "(") + resumed.group(2)
        if body.startswith("+++ "):
            trace.exits[pid] = body.strip("+ ")
            continue
        call = _CALL.match(body)
        if not call:
            trace.unparsed += not body.startswith("---")
            continue
        _record(trace, pid, call.group(1), call.group(2), call.group(3), call.group(4).strip(), mine, body)
    return trace


def _record(trace: Trace, pid: int, name: str, args: str, ret: str, after: str, mine: set[str], line: str) -> None:
    parts = _split_args(args)
    programs = trace.programs.setdefault(pid, [])
    if name in _REACH_CALLS:
        targets = parts[1:3] if name in ("ptrace", "tgkill") else parts[:1]
        if any(t.split("<")[0].strip() in mine for t in targets):
            _reach(trace, pid, line)
        return
    if name == "io_uring_setup":
        _reach(trace, pid, line)  # file I/O the trace would not see
        return
    if name in ("execve", "execveat"):
        if ret != "0":
            return
        strings = _strings(args)
        if name == "execveat":
            base = _fd_path(parts[0])[1] if parts else None
            path = strings[0] if strings else ""
            path = posixpath.join(base, path) if base and not path.startswith("/") else path
            argv_text = parts[2] if len(parts) > 2 else ""
        else:
            path = strings[0] if strings else ""
            argv_text = parts[1] if len(parts) > 1 else ""
        argv = _strings(argv_text) if argv_text.startswith("[") else None
        if len(programs) >= MAX_EXECS:
            programs.pop(1)  # keep the first and the latest ones
        programs.append(Program(path=path, argv=argv))
        return
    if name not in ("open", "openat", "openat2"):
        return
    strings = _strings(args)
    asked = strings[0] if strings else ""
    base = None
    if name != "open" and parts:
        base = _fd_path(parts[0])[1]
    requested = asked if asked.startswith("/") or base is None else posixpath.join(base, asked)
    got = _FD_PATH.match(ret + after) if ret.isdigit() else None
    resolved = got.group(2) if got else None
    for path in (requested, resolved):
        if path and (_proc_target(path) in mine or any(m in path for m in OBSERVER_MARKS)):
            _reach(trace, pid, line)
            break
    if resolved is None:
        return
    if not programs:  # opened before any exec we saw (the command's first process)
        programs.append(Program(path="", argv=None))
    program = programs[-1]
    if program.cwd is None and name != "open" and parts and parts[0].startswith("AT_FDCWD<"):
        program.cwd = base
    program.opened_total += 1
    resolved = posixpath.normpath(resolved)
    if len(program.opened) < MAX_OPENED and (trace.keep is None or trace.keep(resolved)):
        program.opened.append(resolved)


def _proc_target(path: str) -> str | None:
    match = _PROC.match(posixpath.normpath(path))
    return match.group(1) if match else None


def _reach(trace: Trace, pid: int, line: str) -> None:
    trace.reached_total += 1
    if len(trace.reached) < MAX_REACHED:
        trace.reached.append(f"{pid} {line}"[:300])


def script_of(argv: list[str] | None) -> tuple[str, str | None]:
    """What a Python command line runs: ("file", path) | ("module", name) | ("command", None) |
    ("stdin", None), from the interpreter's argv (options before the script, as CPython reads
    them: -c and -m end the options, -W/-X/-Q take a value)."""
    args = list(argv or [])[1:]
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return ("file", args[i + 1]) if i + 1 < len(args) else ("stdin", None)
        if arg == "-" or not arg.startswith("-"):
            return ("stdin", None) if arg == "-" else ("file", arg)
        if arg.startswith("--"):
            i += 1 + (arg in ("--check-hash-based-pycs",))
            continue
        flags = arg[1:]
        for j, ch in enumerate(flags):
            if ch == "c":
                return "command", None
            if ch == "m":
                rest = flags[j + 1:]
                if rest:
                    return "module", rest
                return ("module", args[i + 1]) if i + 1 < len(args) else ("command", None)
            if ch in "WXQ":
                i += 0 if flags[j + 1:] else 1
                break
        i += 1
    return "stdin", None


def summarize(trace: Trace, pids: list[int], interesting: set[str], repo: str | None) -> dict:
    """What the stage row keeps of a trace for the processes `pids` (those whose witness record
    carries the stage's nonce): their programs with the opened files under `repo` or in
    `interesting`; and the totals. JSON-ready."""
    keep: dict[str, list[dict]] = {}
    prefix = (repo or "/nonexistent").rstrip("/") + "/"
    for pid in pids:
        programs = trace.programs.get(pid)
        if programs is None:
            continue
        rows = []
        for program in programs:
            row = program.as_dict()
            row["opened"] = sorted({p for p in program.opened if p.startswith(prefix) or p in interesting})
            rows.append(row)
        keep[str(pid)] = rows
    return {"processes": len(trace.programs), "lines": trace.lines, "unparsed": trace.unparsed,
            "reached": list(trace.reached), "reached_total": trace.reached_total, "pids": keep}


__all__ = ["OBSERVER_MARKS", "Program", "Trace", "parse_trace", "script_of", "summarize"]
