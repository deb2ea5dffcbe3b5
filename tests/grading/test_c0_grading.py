"""C0 grading is pure: raw probe record -> stage result. Messages are pyright 1.1.414's own texts."""

from __future__ import annotations

import copy

import pytest

from reb_ray.grading.c0 import C0_KEYS, grade_c0, import_name

REPO = "/work/repo"
SITE = "/opt/envs/research/lib/python3.11/site-packages"


def diag(name: str, line: int = 1, file: str = "main.py", rule: str = "reportMissingImports") -> dict:
    """A pyright --outputjson diagnostic; `line` is 1-based like an editor (pyright's JSON is 0-based)."""
    if rule == "reportMissingImports":
        message, severity = f'Import "{name}" could not be resolved', "error"
    else:
        message, severity = f'Import "{name}" could not be resolved from source', "warning"
    pos = {"line": line - 1, "character": 7}
    return {"file": f"{REPO}/{file}", "severity": severity, "message": message,
            "range": {"start": pos, "end": pos}, "rule": rule}


def raw_record(*diags: dict, guarded=(), hooks=(), site=(SITE,), search=None) -> dict:
    search = list(search) if search is not None else [
        "/opt/reb-ray-toolbox/pyright/dist/typeshed-fallback/stdlib", REPO, "/usr/lib/python3.11", *site]
    return {
        "pyright_version": "1.1.414",
        "repo": REPO,
        "python": "/opt/envs/research/bin/python",
        "python_ok": True,
        "pyright_exit_code": 1 if diags else 0,
        "pyright": {"version": "1.1.414", "generalDiagnostics": list(diags),
                    "summary": {"filesAnalyzed": 3, "errorCount": len(diags)}},
        "pyright_stderr_tail": "",
        "search_paths": search,
        "search_paths_real": search,
        "interpreter_site_packages": list(site),
        "guarded_imports": [list(g) for g in guarded],
        "editable_hook_installs": list(hooks),
        "error": None,
    }


def test_keys_are_exactly_the_contract():
    assert set(grade_c0(raw_record(), 120)) == set(C0_KEYS)
    assert set(grade_c0(None, 120)) == set(C0_KEYS)


def test_success_when_nothing_is_missing():
    g = grade_c0(raw_record(), 120)
    assert g["c0_status"] == "success" and g["c0_missing"] == 0 and g["c0_missing_modules"] == []
    assert g["c0_total"] == 120 and g["pyright_version"] == "1.1.414"
    assert g["reason"] is None and g["failure_category"] is None


def test_distinct_top_level_modules():
    g = grade_c0(raw_record(diag("foo.bar"), diag("foo.baz", 2), diag("foo", 3), diag("numpy", 4),
                            diag("numpy", 1, file="other.py")), 50)
    assert g["c0_status"] == "failure"
    assert g["c0_missing"] == 2 and g["c0_missing_modules"] == ["foo", "numpy"]


def test_f02_namespace_package_counts_once_and_is_stable():
    raw = raw_record(diag("ns.a", 1), diag("ns.b", 2))
    first = grade_c0(raw, 10)
    assert first["c0_missing"] == 1 and first["c0_missing_modules"] == ["ns"]
    reordered = copy.deepcopy(raw)
    reordered["pyright"]["generalDiagnostics"].reverse()
    assert grade_c0(reordered, 10) == first
    assert first["pyright_version"] == "1.1.414"


def test_relative_imports_are_ignored():
    g = grade_c0(raw_record(diag("."), diag(".x", 2), diag("..pkg.mod", 3), diag("real_missing", 4)), 10)
    assert g["c0_missing"] == 1 and g["c0_missing_modules"] == ["real_missing"]


def test_missing_source_is_its_own_column():
    g = grade_c0(raw_record(diag("yaml", rule="reportMissingModuleSource"),
                            diag("six.moves", 2, rule="reportMissingModuleSource"),
                            diag("six", 3, rule="reportMissingModuleSource")), 10)
    assert g["c0_status"] == "success" and g["c0_missing"] == 0
    assert g["c0_missing_source"] == 2 and g["c0_missing_source_modules"] == ["six", "yaml"]


def test_f05_guarded_imports_listed_apart():
    # main.py: line 1 `import hardpkg` (installed: no diagnostic), lines 3 and 7 guarded imports.
    raw = raw_record(diag("apex", 3), diag("deepspeed", 7), guarded=[("main.py", 3), ("main.py", 7)])
    g = grade_c0(raw, 3)
    assert g["c0_missing"] == 2 and g["c0_missing_modules"] == ["apex", "deepspeed"]
    assert g["c0_guarded_modules"] == ["apex", "deepspeed"]


def test_guarded_needs_every_site_guarded():
    raw = raw_record(diag("apex", 3), diag("apex", 9, file="train.py"), diag("deepspeed", 7),
                     guarded=[("main.py", 3), ("main.py", 7)])
    g = grade_c0(raw, 3)
    assert g["c0_guarded_modules"] == ["deepspeed"]  # apex is also imported unguarded in train.py


def test_editable_hooks_surface():
    g = grade_c0(raw_record(diag("bar"), hooks=["__editable__.bar-0.1.pth"]), 3)
    assert g["c0_missing_modules"] == ["bar"] and g["c0_editable_hooks"] == ["__editable__.bar-0.1.pth"]


def _assert_not_run(g: dict, category: str | None) -> None:
    assert g["c0_status"] == "not_run" and g["reason"]
    assert g["failure_category"] == category
    for key in ("c0_missing", "c0_missing_modules", "c0_missing_source", "c0_missing_source_modules", "c0_guarded_modules"):
        assert g[key] is None, key  # never 0 for a stage that did not run


def test_not_run_without_record():
    g = grade_c0(None, 77)
    _assert_not_run(g, "infra_toolbox")
    assert g["c0_total"] == 77


def test_not_run_when_pyright_gave_no_json():
    raw = raw_record()
    raw.update(pyright=None, pyright_exit_code=None, pyright_error="cannot start /opt/reb-ray-toolbox/node: [Errno 2]")
    g = grade_c0(raw, 5)
    _assert_not_run(g, "infra_toolbox")
    assert "node" in g["reason"]


def test_an_interpreter_that_does_not_run_misses_every_baseline_import():
    """Issue 9: the agent's broken interpreter is its failure, never a C0 that is free (0/total)."""
    raw = raw_record()
    raw.update(python_ok=False, python_error="cannot start /opt/envs/gone/bin/python")
    g = grade_c0(raw, 5)
    assert (g["c0_status"], g["c0_missing"], g["c0_total"], g["failure_category"]) == ("failure", 5, 5, "interpreter_broken")
    assert "cannot start" in g["reason"]
    assert grade_c0(raw, None)["c0_missing"] is None  # an unknown total stays unknown, never 0


def test_f03_search_paths_without_site_packages_is_misconfigured():
    raw = raw_record(*[diag(f"m{i}", i) for i in range(1, 40)], search=["/opt/typeshed/stdlib", REPO])
    g = grade_c0(raw, 40)
    _assert_not_run(g, "infra_probe_misconfigured")
    assert SITE in g["reason"]


def test_unknown_search_paths_are_misconfigured():
    raw = raw_record(diag("x"))
    raw.update(search_paths=None, search_paths_real=None)
    _assert_not_run(grade_c0(raw, 1), "infra_probe_misconfigured")


def test_pyright_timeout_is_not_run():
    raw = raw_record()
    raw.update(pyright=None, pyright_timed_out=True, pyright_error="timed out after 540s")
    _assert_not_run(grade_c0(raw, 1), "timeout")


def test_probe_error_is_not_run():
    raw = {"probe_version": 1, "pyright": None, "python_ok": False, "error": "RuntimeError: boom"}
    _assert_not_run(grade_c0(raw, 1), "infra_toolbox")


@pytest.mark.parametrize(
    "message,name",
    [
        ('Import "foo.bar" could not be resolved', "foo.bar"),
        ('Import "yaml" could not be resolved from source', "yaml"),
        ('Import ".x" could not be resolved', ".x"),
        ('Import "torch" konnte nicht aufgel\u00f6st werden.', "torch"),  # a localized text still parses
        ("no name here", None),
    ],
)
def test_import_name(message, name):
    assert import_name(message) == name


def test_unowned_counts_only_modules_c0_calls_resolved():
    """c0_unowned: imports pyright resolved whose file no distribution owns (or was changed after
    install); missing and missing-source modules are C0's own columns, never counted twice."""
    raw = raw_record(diag("absent"), diag("yaml", rule="reportMissingModuleSource"))
    raw["import_owners"] = {
        "numpy": {"owner": "unowned", "path": f"{SITE}/numpy/__init__.py", "name": None},
        "torch": {"owner": "modified", "path": f"{SITE}/torch/__init__.py", "name": "torch-2.5.1"},
        "requests": {"owner": "distribution", "path": f"{SITE}/requests/__init__.py", "name": "requests-2.32.0"},
        "json": {"owner": "stdlib", "path": None, "name": None},
        "mypkg": {"owner": "repository", "path": f"{REPO}/mypkg/__init__.py", "name": None},
        "absent": {"owner": "unowned", "path": "/somewhere/absent.py", "name": None},  # missing for pyright: C0's
        "yaml": {"owner": "unowned", "path": f"{SITE}/yaml.py", "name": None},  # missing source: C0's column
        "odd": "not a dict",
    }
    g = grade_c0(raw, 10)
    assert (g["c0_missing"], g["c0_missing_source"]) == (1, 1)
    assert (g["c0_unowned"], g["c0_unowned_modules"]) == (2, ["numpy", "torch"])
    del raw["import_owners"]  # a record from before the check: unknown, never 0
    assert (grade_c0(raw, 10)["c0_unowned"], grade_c0(raw, 10)["c0_unowned_modules"]) == (None, None)
    raw["import_owners"] = ["not", "a", "dict"]  # a malformed field grades as absent
    assert grade_c0(raw, 10)["c0_unowned"] is None
    assert grade_c0(None, 10)["c0_unowned"] is None
