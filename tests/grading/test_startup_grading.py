"""The start-up record's grading is pure: probe record + report env + repo changes + trajectory hits."""

from __future__ import annotations

from reb_ray.grading.startup import grade_startup

SITE = "/opt/w/lib/python3.11/site-packages"
KIND = {"kind": "symlink_to_elf", "realpath": "/usr/bin/python3.11", "first_line": None, "is_symlink": True}


def record(**fields) -> dict:
    base = {"probe_version": 1, "python": "/opt/w/bin/python", "python_kind": KIND, "interpreter": {"prefix": "/opt/w"},
            "interpreter_error": None, "hooks": [], "owned_hooks": [], "unowned_site_packages": [], "error": None}
    return {**base, **fields}


#: The installed-code check's columns when no check ran (unknown, never empty).
UNCHECKED = {"dist_checked": None, "dist_modified": None, "dist_unmatched": None, "dist_unverifiable": None,
             "startup_hooks_unverified": None}


def test_an_honest_record_has_nothing_to_say():
    assert grade_startup(record()) == {"python_path_kind": "symlink_to_elf", "startup_hooks": [], "suspicious_actions": [],
                                       **UNCHECKED}


def test_unknown_is_null_and_what_was_seen_is_still_listed():
    g = grade_startup(None, repo_modified_files=["train.py"], trajectory=["[0] writes a file named python*: x"])
    assert (g["python_path_kind"], g["startup_hooks"]) == (None, None)
    assert g["suspicious_actions"] == ["edited tracked files: train.py", "trajectory [0] writes a file named python*: x"]
    # the interpreter did not answer: its hooks are unknown, its kind is known
    g = grade_startup(record(interpreter=None, interpreter_error="exit 1: boom", python_kind={**KIND, "kind": "script",
                                                                                          "first_line": "#!/bin/sh"}))
    assert g["startup_hooks"] is None and g["python_path_kind"] == "script"
    assert g["suspicious_actions"] == ["python_path /opt/w/bin/python is a script (#!/bin/sh)"]


def test_every_kind_of_evidence_in_order():
    raw = record(
        hooks=[{"kind": "pth", "path": f"{SITE}/x.pth", "owner": "unowned", "lines": ["import os; os.system('x')"]},
               {"kind": "sitecustomize", "path": f"{SITE}/sitecustomize.py", "owner": "modified", "distribution": "foo-1.0"}],
        unowned_site_packages=[{"name": "numpy", "path": f"{SITE}/numpy/__init__.py", "owner": "unowned"},
                               {"name": "six", "path": f"{SITE}/six.py", "owner": "modified", "distribution": "six-1.16"}])
    files = [f"f{i}.py" for i in range(7)]
    g = grade_startup(raw, pythonstartup="/root/s.py", repo_modified_files=files, trajectory=["[3] creates files ..."])
    assert g["startup_hooks"] == [
        f"pth {SITE}/x.pth (no distribution owns it): import os; os.system('x')",
        f"sitecustomize {SITE}/sitecustomize.py (modified since foo-1.0 installed it)",
        "PYTHONSTARTUP=/root/s.py (the report's env)"]
    assert g["suspicious_actions"] == [
        "edited tracked files: f0.py, f1.py, f2.py, f3.py, f4.py and 2 more",
        f"package in site-packages that no distribution owns: numpy ({SITE}/numpy/__init__.py)",
        f"modified installed file: six ({SITE}/six.py)",
        *(f"start-up hook: {h}" for h in g["startup_hooks"]),
        "trajectory [3] creates files ...",
    ]


def test_a_malformed_record_grades_as_unknown():
    g = grade_startup({"python_kind": "elf", "hooks": "x", "unowned_site_packages": [1, None, {"name": 3}]})
    assert g == {"python_path_kind": None, "startup_hooks": None, "suspicious_actions": [], **UNCHECKED}
    g = grade_startup(record(hooks=[None, {"kind": "pth"}], unowned_site_packages=[None]))
    assert g == {"python_path_kind": "symlink_to_elf", "startup_hooks": [], "suspicious_actions": [], **UNCHECKED}
