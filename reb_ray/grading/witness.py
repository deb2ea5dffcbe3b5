"""The witness of a command stage (C1, C3, C4): did the pinned repository's code run in the
reported interpreter? A pure function of the collected record (reb_ray.probing.witness).

A stage's command that exits as its success rule wants still fails, with the agent category
`unverified_run`, unless at least one interpreter started by it left a valid witness:

1. a witness record exists (the collector ran and the stage's witness directory was read);
2. some interpreter wrote a witness file carrying this stage's nonce;
3. that interpreter is the reported one: the binary really running (/proc/self/exe, else the
   realpath of sys.executable) is the file the report's python_path resolves to, and, when the
   reported interpreter told its sys.prefix before the stage, its sys.prefix is that prefix (a
   venv's python is a symlink to its base interpreter: the prefix tells the venv from the base);
4. that same interpreter ran a file of the pinned commit: its main script, or a module it
   imported from the repository directory or from a distribution installed from the repository,
   whose git blob hash is a blob of the pinned commit's tree.

A stage that fails by its own rule stays the failure it is; its witness is still recorded.
docs/grading-witness.md says what this proves and what it cannot.
"""

from __future__ import annotations

import posixpath
from typing import Any

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
    witness_repo_files} for one stage's collected record `raw` (None: nothing was collected).

    witness_interpreters counts the nonce-carrying interpreter records; witness_interpreter is
    the binary of the first that passed (else of the first seen); witness_repo_files the
    distinct pinned repository files the passing interpreters ran (null when none passed).
    """
    out = {"witness_status": MISSING, "witness_reason": None, "witness_interpreters": None,
           "witness_interpreter": None, "witness_repo_files": None}
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
    same = [r for r in ours if want and _ran(r) == want and (not prefix or r.get("prefix_realpath") == prefix)]
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
    out.update(witness_status=VALID, witness_interpreter=_ran(passing[0][0]),
               witness_repo_files=len({f for _, files in passing for f in files}))
    return out


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


WITNESS_COLUMNS = ("witness_status", "witness_interpreters", "witness_interpreter", "witness_repo_files")

__all__ = ["UNVERIFIED_RUN", "WITNESS_COLUMNS", "apply_witness", "grade_witness"]
