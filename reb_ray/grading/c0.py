"""Grading C0 (static imports): a pure function of the raw record of probes/c0_probe.py.

C0 counts DISTINCT TOP-LEVEL modules that pyright flags with `reportMissingImports` (the paper's
metric; a namespace package `ns` split over `ns.a` and `ns.b` counts once);
relative imports are the repository's own and never count. `reportMissingModuleSource` (a stub
exists, the package does not) is a separate column. Modules whose every missing-import
diagnostic sits on an import guarded by `except ImportError` are listed apart, so both a
strict and an adjusted C0 can be computed. Missing modules that live inside the repository below
its root (importable only after a runtime sys.path edit, e.g. `dnnlib` from
third_party/stylegan) still count, as in the paper, and are listed apart too, so a reader can
tell them from a missing package. A C0 that could not be measured is `not_run` with a
reason and `c0_missing` None, never 0: no raw record or no pyright JSON (the toolbox failed,
`infra_toolbox`), pyright's search paths missing the interpreter's site-packages
(`infra_probe_misconfigured`: C0 would count every import missing). An interpreter that does not run is the agent's doing: C0
fails with every baseline import missing (`c0_missing = baseline_total`, category
`interpreter_broken`; `agent_failed`).

Beside the paper's number, `c0_unowned` counts the modules C0 calls resolved whose file no
installed distribution owns (an empty `site-packages/numpy/__init__.py` made by hand resolves
for pyright exactly like numpy): see `unowned_modules` and docs/DECISIONS.md. It never changes
`c0_missing` or the status. When the probe phase checked the installed distributions against
what was published (the record's `installed`, reb_ray.grading.installed), a module resolved to a
distribution whose files differ from its published artifact, to metadata no published artifact
matches (a hand-written `*.dist-info` with a RECORD that fits a stub), or to a top-level entry
no metadata names counts as unowned too, whatever the sandbox's own RECORD says.

Pyright 1.1.414 messages (English is forced by the probe):
    Import "foo.bar" could not be resolved                 (reportMissingImports, error)
    Import "yaml" could not be resolved from source        (reportMissingModuleSource, warning)
"""

from __future__ import annotations

import posixpath
import re

from reb_ray.grading.installed import unowned_by_check
from reb_ray.grading.record_types import PROBE_RECORD_INVALID, conform, malformed_reason

MISSING_RULE = "reportMissingImports"
SOURCE_RULE = "reportMissingModuleSource"
_MESSAGE = re.compile(r'^Import "(?P<name>[^"]+)" could not be resolved')
_ANY_QUOTED = re.compile(r'["\u201c\u201e\u00ab\u2018\']\s*(?P<name>[.\w]+)\s*["\u201d\u201c\u00bb\u2019\']')

C0_KEYS = (
    "c0_status", "c0_missing", "c0_missing_modules", "c0_missing_source", "c0_missing_source_modules",
    "c0_guarded_modules", "c0_repo_path_modules", "c0_editable_hooks", "c0_total", "pyright_version",
    "c0_unowned", "c0_unowned_modules", "reason", "failure_category",
)
#: Owners (probes/ownership.py) that make a resolved import unowned: no installed distribution's
#: manifest lists the file it resolves to, or one does but the file's bytes differ from its hash.
UNOWNED = ("unowned", "modified")


_DIAGNOSTIC = {"rule": str, "message": str, "file": str, "range": {"start": {"line": int}}}
#: The fields of probes/c0_probe.py's record that the grader reads, and their JSON types.
RECORD_SHAPE = {
    "pyright_version": str, "editable_hook_installs": [str], "error": str, "python_ok": bool, "python_error": str,
    "python": str, "pyright_timed_out": bool, "pyright_error": str, "pyright_exit_code": int, "pyright_stderr_tail": str,
    "pyright": {"generalDiagnostics": [_DIAGNOSTIC]}, "search_paths_real": [str], "search_paths": [str],
    "interpreter_site_packages": [str], "guarded_imports": [list], "nested_modules": dict, "sys_path_edits": list,
    "repo": str, "import_owners": dict, "installed": dict,
}


def import_name(message: str) -> str | None:
    """The module named by a pyright import diagnostic's message, or None if it names none."""
    match = _MESSAGE.match(message) or _ANY_QUOTED.search(message)
    return match.group("name") if match else None


def _diagnostics(raw: dict) -> list[dict]:
    diags = raw["pyright"].get("generalDiagnostics")
    return [d for d in diags if isinstance(d, dict)] if isinstance(diags, list) else []


def _rel(path: str, repo: str | None) -> str:
    if repo and (path == repo or path.startswith(repo.rstrip("/") + "/")):
        return posixpath.relpath(path, repo)
    return path


def _missing(raw: dict, rule: str) -> dict[str, list[tuple[str, int]]]:
    """Top-level module -> [(file relative to repo, 1-based line)] of `rule` diagnostics."""
    found: dict[str, list[tuple[str, int]]] = {}
    for diag in _diagnostics(raw):
        if diag.get("rule") != rule:
            continue
        message = str(diag.get("message", ""))
        name = import_name(message)
        if name is None:
            name = message  # never drop a diagnostic we cannot parse: count it under its text
        if name.startswith("."):
            continue  # relative import: the repository's own code
        line = ((diag.get("range") or {}).get("start") or {}).get("line")
        where = (_rel(str(diag.get("file", "")), raw.get("repo")), line + 1 if isinstance(line, int) else -1)
        found.setdefault(name.split(".")[0], []).append(where)
    return found


def _site_packages_unseen(raw: dict) -> list[str] | None:
    """Interpreter site-packages dirs absent from pyright's search paths; None when unknown."""
    paths = raw.get("search_paths_real") or raw.get("search_paths")
    if paths is None:
        return None
    seen = {p.rstrip("/") for p in paths}
    return [p for p in raw.get("interpreter_site_packages") or [] if p.rstrip("/") not in seen]


def grade_c0(raw: dict | None, baseline_total: int | None) -> dict:
    """C0 stage result from the raw probe record; keys are exactly C0_KEYS.

    `c0_status` is success (no missing import), failure (some, or the interpreter does not run:
    category interpreter_broken; or a record no grader can read: probe_record_invalid, every
    baseline import counted missing) or not_run (with `reason`, and `failure_category`
    infra_toolbox / infra_probe_misconfigured when the harness is at fault, timeout for pyright).
    Fields of the wrong type count as absent (reb_ray.grading.record_types). Never raises.
    """
    try:
        return _grade_c0(conform(raw, RECORD_SHAPE) if isinstance(raw, dict) else raw, baseline_total)
    except Exception as exc:  # noqa: BLE001 - an agent-shaped record must end as a verdict
        result = {key: None for key in C0_KEYS}
        result.update(c0_status="failure", c0_total=baseline_total, c0_missing=baseline_total,
                      failure_category=PROBE_RECORD_INVALID, reason=malformed_reason("C0", exc))
        return result


def _grade_c0(raw: dict | None, baseline_total: int | None) -> dict:
    result = {key: None for key in C0_KEYS}
    result["c0_total"] = baseline_total

    def not_run(reason: str, category: str | None) -> dict:
        result.update(c0_status="not_run", reason=reason, failure_category=category)
        return result

    if not isinstance(raw, dict):
        return not_run("the C0 probe produced no record", "infra_toolbox")
    result["pyright_version"] = raw.get("pyright_version")
    hooks = raw.get("editable_hook_installs")
    result["c0_editable_hooks"] = sorted(hooks) if isinstance(hooks, list) else None
    if raw.get("error"):
        return not_run(f"C0 probe error: {raw['error']}", "infra_toolbox")
    if not raw.get("python_ok"):  # the agent's interpreter: its failure, every baseline import missing
        detail = raw.get("python_error") or "unknown error"
        result.update(c0_status="failure", c0_missing=baseline_total, failure_category="interpreter_broken",
                      reason=f"interpreter {raw.get('python')} does not run: {detail}")
        return result
    if raw.get("pyright_timed_out"):
        return not_run(f"pyright {raw.get('pyright_error') or 'timed out'}", "timeout")
    if not isinstance(raw.get("pyright"), dict):
        detail = raw.get("pyright_error") or (raw.get("pyright_stderr_tail") or "").strip()[-300:] or "no output"
        return not_run(f"pyright produced no JSON (exit {raw.get('pyright_exit_code')}): {detail}", "infra_toolbox")
    unseen = _site_packages_unseen(raw)
    if unseen is None:
        return not_run("pyright's search paths are unknown (verbose run failed)", "infra_probe_misconfigured")
    if unseen:
        return not_run(
            f"pyright's search paths miss the interpreter's site-packages {unseen}", "infra_probe_misconfigured"
        )

    missing = _missing(raw, MISSING_RULE)
    source = _missing(raw, SOURCE_RULE)
    guarded_lines = {(str(f), int(n)) for f, n in raw.get("guarded_imports") or []}
    result.update(
        c0_status="failure" if missing else "success",
        c0_missing=len(missing),
        c0_missing_modules=sorted(missing),
        c0_missing_source=len(source),
        c0_missing_source_modules=sorted(source),
        c0_guarded_modules=sorted(m for m, where in missing.items() if all(w in guarded_lines for w in where)),
        c0_repo_path_modules=sorted(m for m in missing if m in (raw.get("nested_modules") or {}))
        if raw.get("sys_path_edits") else [],
    )
    result["c0_unowned_modules"] = unowned_modules(raw, set(missing) | set(source))
    result["c0_unowned"] = None if result["c0_unowned_modules"] is None else len(result["c0_unowned_modules"])
    if missing:
        result["reason"] = f"{len(missing)} missing: {', '.join(sorted(missing)[:20])}"
    return result


def unowned_modules(raw: dict, unresolved: set[str]) -> list[str] | None:
    """Top-level modules C0 counts as resolved (imported, not in `unresolved`: pyright's missing
    and missing-source ones) whose resolving file no installed distribution owns
    (`import_owners` of the probe record, owner `unowned` or `modified`), sorted. Files of the
    repository (outside an environment inside it) and the standard library are owned. None
    when the record has no ownership facts (a probe older than the check, or it failed)."""
    owners = raw.get("import_owners")
    if not isinstance(owners, dict):
        return None
    found = {name for name, got in owners.items() if isinstance(got, dict) and got.get("owner") in UNOWNED}
    found.update(unowned_by_check(owners, raw.get("installed")) or [])
    return sorted(name for name in found if name not in unresolved)
