"""The witness of a command stage (C1, C3, C4): did the pinned repository's code run in the
reported interpreter? A pure function of the collected record (reb_ray.probing.witness).

A stage's command that exits as its success rule wants still fails, with the agent category
`unverified_run`, unless at least one interpreter started by it left a valid witness:

1. a witness record exists (the collector ran and the stage's witness directory was read);
2. some interpreter wrote a witness file carrying this stage's nonce;
3. that interpreter is the reported one: the binary really running (/proc/self/exe, else the
   realpath of sys.executable) is the file the report's python_path resolves to, which is an
   ELF executable (the kernel runs a script's `#!` interpreter, never the script), and, when the
   reported interpreter told its sys.prefix before the stage, its sys.prefix is that prefix (a
   venv's python is a symlink to its base interpreter: the prefix tells the venv from the base);
4. that same interpreter ran a file of the pinned commit: its main script, or a module it
   imported from the repository directory or from a distribution installed from the repository,
   whose git blob hash (computed by the collector from the file itself, never taken from the
   record) is the pinned commit's blob at that path;
5. when the stage's command names its entry (`stage_entries`: a repository script after
   `python`, or a module after `-m`), that interpreter ran the entry as `__main__`;
6. when the stage ran observed (the `observer` of the record: strace's trace, verified on the
   host; reb_ray.probing.observer), the trace agrees: a valid trace, nothing in it reached for
   the observer, and the interpreter's PID executed a program whose real path is the reported
   interpreter's, with an argv that runs the main the record claims, and opened that file (or,
   without an entry, one of the pinned files the record lists). A trace that disagrees, was
   rewritten or cut makes the stage `unverified_run` as the agent's; no trace because the node
   has no strace (`unavailable`) is the infrastructure's and judged on the record alone.

A stage that fails by its own rule stays the failure it is; its witness is still recorded.
docs/grading-witness.md says what this proves and what it cannot.
"""

from __future__ import annotations

import posixpath
import shlex
from typing import Any

from reb_ray.grading.observed import script_of

UNVERIFIED_RUN = "unverified_run"
#: Witness statuses in the stage row: valid | unverified | missing (no record could be read).
VALID, UNVERIFIED, MISSING = "valid", "unverified", "missing"


def _is_dict(value: Any) -> bool:
    return isinstance(value, dict)


def _ran(record: dict) -> str | None:
    """The binary an interpreter record says was running."""
    exe = record.get("proc_exe")
    if isinstance(exe, str) and exe:
        return posixpath.normpath(exe.removesuffix(" (deleted)"))
    real = record.get("executable_realpath")
    return real if isinstance(real, str) and real else None


def _pinned_files(record: dict) -> list[str]:
    """Paths (relative to the repository, or the main script's) of pinned files the record ran."""
    listed = record.get("repo_files")
    files = [f for f in listed if _is_dict(f) and f.get("pinned") is True] if isinstance(listed, list) else []
    names = [str(f.get("path")) for f in files]
    main = record.get("main")
    if _is_dict(main) and main.get("pinned") is True and (main.get("repo_path") or main.get("path")):
        names.append(str(main.get("repo_path") or main["path"]))
    return sorted(set(names))


def grade_witness(raw: dict | None) -> dict:
    """{witness_status, witness_reason, witness_interpreters, witness_interpreter,
    witness_repo_files, witness_observed} for one stage's collected record `raw` (None: nothing
    was collected).

    witness_interpreters counts the nonce-carrying interpreter records; witness_interpreter is
    the binary of the first that passed (else of the first seen); witness_repo_files the
    distinct pinned repository files the passing interpreters ran (null when none passed);
    witness_observed what the kernel's trace says of it: agrees | contradicts | tampered |
    incomplete | unavailable (null: the stage ran unobserved, or no record passed to check).
    """
    out = {"witness_status": MISSING, "witness_reason": None, "witness_interpreters": None,
           "witness_interpreter": None, "witness_repo_files": None, "witness_observed": None}
    if not _is_dict(raw):
        out["witness_reason"] = "no witness record: the witness collector left none"
        return out
    if raw.get("error"):
        out["witness_reason"] = f"the witness collector failed: {str(raw['error'])[:200]}"
        return out
    nonce = raw.get("nonce")
    records = [r for r in (raw.get("records") or []) if _is_dict(r)]
    ours = [r for r in records if isinstance(nonce, str) and r.get("nonce") == nonce]
    wrong = len(records) - len(ours)
    out.update(witness_status=UNVERIFIED, witness_interpreters=len(ours))
    if not ours:
        extra = f" ({wrong} file(s) with another nonce)" if wrong else ""
        out["witness_reason"] = f"no interpreter of the stage wrote a witness with its nonce{extra}"
        return out
    want = raw.get("python_realpath")
    prefix = raw.get("expected_prefix")
    # /proc/self/exe is never a script: a record naming one as its binary was written by something else
    binary = raw.get("python_kind") in ("elf", None)
    same = [r for r in ours if binary and want and _ran(r) == want and (not prefix or r.get("prefix_realpath") == prefix)]
    if not same:
        seen = sorted({f"{_ran(r)} (prefix {r.get('prefix_realpath')})" for r in ours})
        kind = raw.get("python_kind")
        out["witness_interpreter"] = _ran(ours[0])
        out["witness_reason"] = (f"no witness from the reported interpreter {raw.get('python_path')} "
                                 f"(resolves to {want}, a {kind} file; prefix {prefix}); interpreters seen: "
                                 f"{', '.join(seen)[:300]}")
        return out
    ran = [(r, _pinned_files(r)) for r in same]
    passing = [(r, files) for r, files in ran if files]
    if not passing:
        mains = sorted({_main_text(r) for r in same})
        pinned = "" if raw.get("pinned_known") else " (the pinned commit's blobs could not be listed)"
        out["witness_interpreter"] = _ran(same[0])
        out["witness_reason"] = (f"the reported interpreter ran no file of the pinned repository{pinned}; "
                                 f"it ran: {', '.join(mains)[:300]}")
        return out
    entries = raw.get("entries") if _is_dict(raw.get("entries")) else None
    if entries and (entries.get("files") or entries.get("modules")):
        as_main = [(r, files) for r, files in passing if _ran_entry(r, entries)]
        if not as_main:
            out["witness_interpreter"] = _ran(passing[0][0])
            out["witness_reason"] = (f"the reported interpreter did not run the stage's entry "
                                     f"({_entries_text(entries)}) as __main__ from the pinned commit; it ran: "
                                     f"{', '.join(sorted({_main_text(r) for r, _ in passing}))[:300]}")
            return out
        passing = as_main
    observer = raw.get("observer")
    if _is_dict(observer):
        status = observer.get("status")
        if status == "unavailable":
            out["witness_observed"] = "unavailable"
        elif status != "ok":
            out.update(witness_observed=status if status in ("tampered", "incomplete") else "tampered",
                       witness_interpreter=_ran(passing[0][0]),
                       witness_reason=f"the kernel's trace of the stage is not usable: {observer.get('reason')}")
            return out
        elif observer.get("reached") or observer.get("reached_total"):
            reached = observer.get("reached") or []
            out.update(witness_observed="tampered", witness_interpreter=_ran(passing[0][0]),
                       witness_reason=f"the stage reached for its observer: {'; '.join(map(str, reached[:2]))[:300]}")
            return out
        else:
            seen = [(r, files, _contradiction(r, raw, observer, entries)) for r, files in passing]
            agreed = [(r, files) for r, files, why in seen if why is None]
            if not agreed:
                out.update(witness_observed="contradicts", witness_interpreter=_ran(passing[0][0]),
                           witness_reason=f"the kernel's trace contradicts the witness: {seen[0][2]}"[:500])
                return out
            passing = agreed
            out["witness_observed"] = "agrees"
    out.update(witness_status=VALID, witness_interpreter=_ran(passing[0][0]),
               witness_repo_files=len({f for _, files in passing for f in files}))
    return out


def stage_entries(command: str | list[str], workdir: str = ".") -> dict:
    """{"files": [...], "modules": [...]}: the entry the stage's command names, for the rule's
    `__main__` requirement. files: repository scripts run by a `python` word (relative paths
    without `$`, joined to the stage's `workdir` relative to the repository), and such `.py`
    arguments of a module run with `-m` (a launcher: `-m torch.distributed.run train.py`);
    modules: names after `-m`. Nothing named (a `-c` command, a helper outside the repository):
    both empty, and any pinned file the interpreter imported will do. Pure."""
    try:
        words = shlex.split(command) if isinstance(command, str) else list(command)
    except ValueError:
        return {"files": [], "modules": []}
    files, modules = [], []

    def repo_file(word: str) -> None:
        if word.endswith(".py") and "$" not in word and not word.startswith(("/", "~")):
            files.append(posixpath.normpath(posixpath.join(workdir or ".", word)))

    for i, word in enumerate(words):
        if not posixpath.basename(word).startswith("python") or "=" in word:
            continue
        args = []
        for rest in words[i + 1:]:
            if rest in ("&&", "||", ";", "|", "&") or rest.endswith(";"):
                break
            args.append(rest)
        kind, value = script_of([word, *args])
        if kind == "file" and value:
            repo_file(value)
        elif kind == "module" and value:
            modules.append(value)
            for rest in args[args.index(value) + 1:] if value in args else []:
                if not rest.startswith("-"):
                    repo_file(rest)
    return {"files": sorted(set(files)), "modules": sorted(set(modules))}


def _entries_text(entries: dict) -> str:
    names = [str(f) for f in entries.get("files") or []] + [f"-m {m}" for m in entries.get("modules") or []]
    return ", ".join(names)[:200]


def _ran_entry(record: dict, entries: dict) -> bool:
    """Whether `record`'s main program is a pinned file that is one of the stage's entries."""
    main = record.get("main")
    if not _is_dict(main) or main.get("pinned") is not True:
        return False
    if main.get("kind") == "file":
        return posixpath.normpath(str(main.get("repo_path") or "")) in set(entries.get("files") or [])
    if main.get("kind") == "module":
        return str(main.get("value") or "") in set(entries.get("modules") or [])
    return False


def _contradiction(record: dict, raw: dict, observer: dict, entries: dict | None) -> str | None:
    """Why the kernel's trace contradicts `record` (None: it agrees): the record's PID must have
    executed a program that resolves to the reported interpreter, whose argv runs the main the
    record claims, and have opened that main file (without an entry: a pinned file it lists)."""
    pid = record.get("pid")
    programs = (observer.get("pids") or {}).get(str(pid)) if _is_dict(observer.get("pids")) else None
    if not programs:
        return f"process {pid} never executed a program in the trace"
    want = raw.get("python_realpath")
    realpaths = observer.get("realpaths") if _is_dict(observer.get("realpaths")) else {}
    ours = [p for p in programs if _is_dict(p) and want and realpaths.get(p.get("path")) == want]
    if not ours:
        names = sorted({f"{p.get('path')} (real {realpaths.get(p.get('path'))})" for p in programs if _is_dict(p)})
        return f"process {pid} executed {', '.join(names)[:200]}, never the reported interpreter {want}"
    repo = str(raw.get("repo") or "").rstrip("/")
    main = record.get("main") if _is_dict(record.get("main")) else {}
    wanted = _main_file(main, repo)
    for program in ours:
        opened = set(program.get("opened") or [])
        if wanted is not None and main.get("kind") in ("file", "module"):
            kind, value = script_of(program.get("argv") or [])
            if main.get("kind") == "file":
                cwd = program.get("cwd") or ""
                if kind == "file" and value and posixpath.normpath(posixpath.join(cwd, value)) == wanted and wanted in opened:
                    return None
            elif kind == "module" and value == main.get("value") and wanted in opened:
                return None
        elif entries is None or not (entries.get("files") or entries.get("modules")):
            listed = {f"{repo}/{f.get('path')}" for f in record.get("repo_files") or []
                      if _is_dict(f) and f.get("pinned") is True and not f.get("installed")}
            listed |= {str(f.get("file")) for f in record.get("repo_files") or []
                       if _is_dict(f) and f.get("pinned") is True and f.get("installed") and f.get("file")}
            if listed & opened:
                return None
    return (f"process {pid} ran the reported interpreter but the trace shows no "
            f"{'run of ' + wanted if wanted else 'pinned repository file opened'} "
            f"(argv {(ours[-1].get('argv') or [])[:6]})")


def _main_file(main: dict, repo: str) -> str | None:
    """The absolute file of a record's pinned main program (None: no pinned main)."""
    if main.get("pinned") is not True:
        return None
    path = main.get("path")
    if isinstance(path, str) and path.startswith("/"):
        return posixpath.normpath(path)
    rel = main.get("repo_path")
    return posixpath.normpath(f"{repo}/{rel}") if isinstance(rel, str) and repo else None


def _main_text(record: dict) -> str:
    main = record.get("main")
    if not _is_dict(main):
        return "no main program recorded"
    value = main.get("path") or main.get("value") or ""
    return f"{main.get('kind')} {str(value).strip()[:80]}"


def apply_witness(graded: dict, witness: dict) -> dict:
    """`graded` ({status, failure_category, reason} of a command stage) under its witness
    verdict: a success without a valid witness becomes the agent's `unverified_run`."""
    if graded["status"] != "success" or witness["witness_status"] == VALID:
        return graded
    return {"status": "failure", "failure_category": UNVERIFIED_RUN,
            "reason": f"command succeeded but the run is unverified: {witness['witness_reason']}"}


WITNESS_COLUMNS = ("witness_status", "witness_interpreters", "witness_interpreter", "witness_repo_files",
                   "witness_observed")

__all__ = ["UNVERIFIED_RUN", "WITNESS_COLUMNS", "apply_witness", "grade_witness", "stage_entries"]
