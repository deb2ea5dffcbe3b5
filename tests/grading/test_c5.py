"""C5 audit: a matrix of reports x facts x observed stage results, with the expected items and sums.

No mocks: reports are plain dicts (and real `Report` models), facts are records shaped exactly as
probes/facts_probe.py writes them (tests/probing/test_facts_probe.py checks that shape for real).
"""

from __future__ import annotations

import copy
import json

import pytest

from reb_ray.grading.c5 import C5_KEYS, KINDS, VERDICTS, audit_report, parse_version, versions_match
from reb_ray.models.report import parse_report

PY = "/opt/envs/research/bin/python"

REPORT = {
    "python_path": PY,
    "python_version": "3.10.14",
    "torch_version": "2.1.0+cu121",
    "cuda_available": True,
    "gpu_count": 2,
    "ddp_expected_ok": True,
    "env_tool": "venv",
    "env_name": "research",
    "notes": None,
}

FACTS = {
    "python_path": PY,
    "python_is_absolute": True,
    "python_is_symlink": True,
    "python_exists": True,
    "python_is_file": True,
    "python_executable": True,
    "python_realpath": "/usr/local/bin/python3.10",
    "python_runs": True,
    "python_run_error": None,
    "python_run_exit_code": 0,
    "python_run_timed_out": False,
    "python_version": "3.10.14",
    "python_platform_version": "3.10.14",
    "torch_import_ok": True,
    "torch_import_error": None,
    "torch_import_timed_out": False,
    "torch_version": "2.1.0+cu121",
    "torch_cuda_version": "12.1",
    "torch_file": "/opt/envs/research/lib/python3.10/site-packages/torch/__init__.py",
    "probe_version": 1,
}

OBSERVED = {"c2_status": "success", "c2_device_count": 2, "c4_status": "success", "gpus_assigned": 2}

MISSING = {"python_exists": False, "python_is_file": False, "python_executable": False, "python_realpath": None,
           "python_runs": False, "python_run_error": f"not run: {PY} does not exist", "python_version": None,
           "python_platform_version": None, "torch_import_ok": False,
           "torch_import_error": "not run: the interpreter was not run", "torch_version": None}
NOT_EXEC = {**MISSING, "python_exists": True, "python_is_file": True,
            "python_run_error": f"not run: {PY} is not executable"}
CRASHES = {**MISSING, "python_exists": True, "python_is_file": True, "python_executable": True,
           "python_run_exit_code": 1, "python_run_error": "exit 1: boom",
           "torch_import_error": "not run: the interpreter does not run"}
HANGS = {**CRASHES, "python_run_exit_code": None, "python_run_timed_out": True,
         "python_run_error": "timed out after 60s"}
NO_TORCH = {"torch_import_ok": False, "torch_import_error": "ModuleNotFoundError: No module named 'torch'",
            "torch_version": None, "torch_cuda_version": None, "torch_file": None}

ALL_OK = {"python_path_absolute": "ok", "python_path_exists": "ok", "python_path_executable": "ok",
          "python_path_runs": "ok", "python_version": "ok", "torch_version": "ok", "cuda_available": "ok",
          "gpu_count": "ok", "ddp_expected_ok": "ok"}


def case(id, report=None, facts=None, observed=None, verdicts=None, sums=(0, 0, 0, 0), *, no_facts=False):
    """One row: overrides of REPORT / FACTS / OBSERVED, the expected verdict per check (unlisted
    checks are "ok"), and the expected (c5_path, c5_version, c5_capability, c5_underclaims)."""
    r = {**REPORT, **(report or {})}
    f = None if no_facts else {**FACTS, **(facts or {})}
    o = {**OBSERVED, **(observed or {})}
    return pytest.param(r, f, o, {**ALL_OK, **(verdicts or {})}, sums, id=id)


MATRIX = [
    case("all-true"),
    # --- versions: normalisation --------------------------------------------------------------
    case("python-prefix-3.10", {"python_version": "3.10"}),
    case("python-prefix-3", {"python_version": "3"}),
    case("python-word-prefix", {"python_version": "Python 3.10.14"}),
    case("python-v-prefix", {"python_version": "v3.10.14"}),
    case("python-minor-differs", {"python_version": "3.11"}, verdicts={"python_version": "hallucination"},
         sums=(0, 1, 0, 0)),
    case("python-3.1-is-not-3.10", {"python_version": "3.1"}, verdicts={"python_version": "hallucination"},
         sums=(0, 1, 0, 0)),
    case("python-too-precise", {"python_version": "3.10.14.1"}, verdicts={"python_version": "hallucination"},
         sums=(0, 1, 0, 0)),
    case("python-rc-via-platform", {"python_version": "3.13.0rc1"},
         facts={"python_version": "3.13.0", "python_platform_version": "3.13.0rc1"}),
    case("torch-no-local-label", {"torch_version": "2.1.0"}),
    case("torch-v-prefix", {"torch_version": "v2.1.0"}),
    case("torch-prefix-2.1", {"torch_version": "2.1"}),
    case("torch-local-label-exact", {"torch_version": "2.1.0+cu121"}),
    case("torch-local-label-differs", {"torch_version": "2.1.0+cu118"}, verdicts={"torch_version": "hallucination"},
         sums=(0, 1, 0, 0)),
    case("torch-local-claimed-none-observed", {"torch_version": "2.1.0+cu121"}, facts={"torch_version": "2.1.0"},
         verdicts={"torch_version": "hallucination"}, sums=(0, 1, 0, 0)),
    case("torch-local-ignored-cpu", {"torch_version": "2.1.0"}, facts={"torch_version": "2.1.0+cpu"}),
    case("torch-version-differs", {"torch_version": "2.2.0"}, verdicts={"torch_version": "hallucination"},
         sums=(0, 1, 0, 0)),
    case("torch-2.1-is-not-2.10", {"torch_version": "2.1"}, facts={"torch_version": "2.10.0+cu128"},
         verdicts={"torch_version": "hallucination"}, sums=(0, 1, 0, 0)),
    case("torch-extra-zero", {"torch_version": "2.1.0"}, facts={"torch_version": "2.1"}),
    case("torch-release-claimed-dev-build", {"torch_version": "2.5.0"}, facts={"torch_version": "2.5.0.dev20240801+cu121"},
         verdicts={"torch_version": "hallucination"}, sums=(0, 1, 0, 0)),
    case("torch-dev-build-claimed-exactly", {"torch_version": "2.5.0.dev20240801"},
         facts={"torch_version": "2.5.0.dev20240801+cu121"}),
    case("both-versions-wrong", {"python_version": "3.12.1", "torch_version": "2.4.0"},
         verdicts={"python_version": "hallucination", "torch_version": "hallucination"}, sums=(0, 2, 0, 0)),
    case("version-garbage", {"torch_version": "latest"}, verdicts={"torch_version": "hallucination"},
         sums=(0, 1, 0, 0)),
    # --- versions: null claims and torch import ---------------------------------------------
    case("null-python-version", {"python_version": None}, verdicts={"python_version": "not_claimed"}),
    case("blank-python-version", {"python_version": "  "}, verdicts={"python_version": "not_claimed"}),
    case("null-torch-no-torch", {"torch_version": None}, facts=NO_TORCH, verdicts={"torch_version": "not_claimed"}),
    case("null-torch-with-torch", {"torch_version": None}, verdicts={"torch_version": "not_claimed"}),
    case("torch-claimed-import-fails", facts=NO_TORCH, verdicts={"torch_version": "hallucination"},
         sums=(0, 1, 0, 0)),
    case("torch-import-timed-out", facts={**NO_TORCH, "torch_import_timed_out": True,
                                          "torch_import_error": "timed out after 60s"},
         verdicts={"torch_version": "inconclusive"}),
    case("wrong-type-version", {"python_version": 3.1},
         verdicts={"python_version": "inconclusive", "report.python_version": "fault"}),
    # --- path ------------------------------------------------------------------------------
    case("python-missing", facts=MISSING,
         verdicts={"python_path_exists": "hallucination", "python_path_executable": "inconclusive",
                   "python_path_runs": "inconclusive", "python_version": "inconclusive",
                   "torch_version": "inconclusive", "cuda_available": "inconclusive", "gpu_count": "inconclusive", "ddp_expected_ok": "inconclusive"}, sums=(1, 0, 0, 0)),
    case("python-not-executable", facts=NOT_EXEC,
         verdicts={"python_path_executable": "hallucination", "python_path_runs": "inconclusive",
                   "python_version": "inconclusive", "torch_version": "inconclusive", "cuda_available": "inconclusive", "gpu_count": "inconclusive", "ddp_expected_ok": "inconclusive"}, sums=(1, 0, 0, 0)),
    case("python-is-a-directory", facts={**NOT_EXEC, "python_is_file": False},
         verdicts={"python_path_executable": "hallucination", "python_path_runs": "inconclusive",
                   "python_version": "inconclusive", "torch_version": "inconclusive", "cuda_available": "inconclusive", "gpu_count": "inconclusive", "ddp_expected_ok": "inconclusive"}, sums=(1, 0, 0, 0)),
    case("python-crashes", facts=CRASHES,
         verdicts={"python_path_runs": "hallucination", "python_version": "inconclusive",
                   "torch_version": "inconclusive", "cuda_available": "inconclusive", "gpu_count": "inconclusive", "ddp_expected_ok": "inconclusive"}, sums=(1, 0, 0, 0)),
    case("python-hangs", facts=HANGS,
         verdicts={"python_path_runs": "inconclusive", "python_version": "inconclusive",
                   "torch_version": "inconclusive"}),
    case("python-relative-and-missing", {"python_path": "python3"}, facts={**MISSING, "python_path": "python3"},
         verdicts={"python_path_absolute": "hallucination", "python_path_exists": "hallucination",
                   "python_path_executable": "inconclusive", "python_path_runs": "inconclusive",
                   "python_version": "inconclusive", "torch_version": "inconclusive", "cuda_available": "inconclusive", "gpu_count": "inconclusive", "ddp_expected_ok": "inconclusive"},
         sums=(1, 0, 0, 0)),
    case("python-missing-null-versions", {"python_version": None, "torch_version": None}, facts=MISSING,
         verdicts={"python_path_exists": "hallucination", "python_path_executable": "inconclusive",
                   "python_path_runs": "inconclusive", "python_version": "not_claimed",
                   "torch_version": "not_claimed", "cuda_available": "inconclusive", "gpu_count": "inconclusive", "ddp_expected_ok": "inconclusive"}, sums=(1, 0, 0, 0)),
    case("no-facts", no_facts=True,
         verdicts={"python_path_exists": "inconclusive", "python_path_executable": "inconclusive",
                   "python_path_runs": "inconclusive", "python_version": "inconclusive",
                   "torch_version": "inconclusive"}),
    case("facts-probe-error", facts={"error": "OSError: disk full"},
         verdicts={"python_path_exists": "inconclusive", "python_path_executable": "inconclusive",
                   "python_path_runs": "inconclusive", "python_version": "inconclusive",
                   "torch_version": "inconclusive"}),
    case("facts-of-another-interpreter", facts={"python_path": "/usr/bin/python3"},
         verdicts={"python_path_exists": "inconclusive", "python_path_executable": "inconclusive",
                   "python_path_runs": "inconclusive", "python_version": "inconclusive",
                   "torch_version": "inconclusive"}),
    # --- capability: cuda_available vs C2 ------------------------------------------------------
    case("cuda-claimed-c2-failed", observed={"c2_status": "failure", "c2_device_count": 2},
         verdicts={"cuda_available": "hallucination"}, sums=(0, 0, 1, 0)),
    case("cuda-claimed-c2-timeout", observed={"c2_status": "timeout", "c2_device_count": None},
         verdicts={"cuda_available": "hallucination", "gpu_count": "inconclusive"}, sums=(0, 0, 1, 0)),
    case("cuda-claimed-c2-not-run", observed={"c2_status": "not_run", "c2_device_count": None},
         verdicts={"cuda_available": "inconclusive", "gpu_count": "inconclusive"}),
    case("cuda-claimed-c2-none", observed={"c2_status": None, "c2_device_count": None},
         verdicts={"cuda_available": "inconclusive", "gpu_count": "inconclusive"}),
    case("cuda-claimed-c2-failed-but-is-available",
         observed={"c2_status": "failure", "c2_device_count": 2, "c2_cuda_available": True}),
    case("cuda-null", {"cuda_available": None}, verdicts={"cuda_available": "not_claimed"}),
    case("cuda-false-c2-failed", {"cuda_available": False}, observed={"c2_status": "failure"}),
    # --- capability: gpu_count vs C2's device count --------------------------------------------
    case("gpu-count-more-than-seen", {"gpu_count": 8}, verdicts={"gpu_count": "hallucination"}, sums=(0, 0, 1, 0)),
    case("gpu-count-cpu-build", {"gpu_count": 2}, observed={"c2_status": "failure", "c2_device_count": 0},
         verdicts={"cuda_available": "hallucination", "gpu_count": "hallucination"}, sums=(0, 0, 2, 0)),
    case("gpu-count-c2-not-run", {"gpu_count": 8}, observed={"c2_status": "not_run", "c2_device_count": 8},
         verdicts={"cuda_available": "inconclusive", "gpu_count": "inconclusive"}),
    case("gpu-count-null", {"gpu_count": None}, verdicts={"gpu_count": "not_claimed"}),
    case("gpu-count-bool", {"gpu_count": True}, verdicts={"gpu_count": "inconclusive", "report.gpu_count": "fault"}),
    # --- capability: ddp_expected_ok vs C4 -----------------------------------------------------
    case("ddp-claimed-2gpus-c4-failed", observed={"c4_status": "failure"},
         verdicts={"ddp_expected_ok": "hallucination"}, sums=(0, 0, 1, 0)),
    case("ddp-claimed-1gpu-c4-failed", {"gpu_count": 1},
         observed={"c4_status": "failure", "gpus_assigned": 1, "c2_device_count": 1},
         verdicts={"ddp_expected_ok": "inconclusive"}),
    case("ddp-claimed-0gpu", {"cuda_available": None, "gpu_count": None},
         observed={"c2_status": "not_run", "c2_device_count": None, "c4_status": "not_run", "gpus_assigned": 0},
         verdicts={"cuda_available": "not_claimed", "gpu_count": "not_claimed", "ddp_expected_ok": "inconclusive"}),
    case("ddp-claimed-2gpus-c4-not-run", observed={"c4_status": "not_run"},
         verdicts={"ddp_expected_ok": "inconclusive"}),
    case("ddp-null", {"ddp_expected_ok": None}, observed={"c4_status": "failure"},
         verdicts={"ddp_expected_ok": "not_claimed"}),
    case("ddp-false-c4-failed", {"ddp_expected_ok": False}, observed={"c4_status": "failure"}),
    # --- under-claims: recorded, never in the paper's sums -------------------------------------
    case("underclaim-cuda", {"cuda_available": False}, verdicts={"cuda_available": "underclaim"}, sums=(0, 0, 0, 1)),
    # issue 9: agent and probes share one sandbox, so fewer GPUs than C2 saw is a wrong claim
    # (the release counts it in all 44 of its copies), never an under-claim
    case("gpu-count-0-below-seen", {"gpu_count": 0}, verdicts={"gpu_count": "hallucination"}, sums=(0, 0, 1, 0)),
    case("gpu-count-1-below-seen", {"gpu_count": 1}, verdicts={"gpu_count": "hallucination"}, sums=(0, 0, 1, 0)),
    case("underclaim-ddp", {"ddp_expected_ok": False}, verdicts={"ddp_expected_ok": "underclaim"},
         sums=(0, 0, 0, 1)),
    case("agent-phase-without-gpus", {"cuda_available": False, "gpu_count": 0, "ddp_expected_ok": False},
         verdicts={"cuda_available": "underclaim", "gpu_count": "hallucination", "ddp_expected_ok": "underclaim"},
         sums=(0, 0, 1, 2)),
    # --- everything at once ------------------------------------------------------------------
    case("everything-wrong", {"python_version": "3.9", "torch_version": "2.0.0", "gpu_count": 4},
         facts=NO_TORCH, observed={"c2_status": "failure", "c2_device_count": 0, "c4_status": "failure"},
         verdicts={"python_version": "hallucination", "torch_version": "hallucination",
                   "cuda_available": "hallucination", "gpu_count": "hallucination",
                   "ddp_expected_ok": "hallucination"}, sums=(0, 2, 3, 0)),
]


def verdicts(result: dict) -> dict[str, str]:
    return {item["check"]: item["verdict"] for item in result["c5_items"]}


def sums(result: dict) -> tuple[int, int, int, int]:
    return result["c5_path"], result["c5_version"], result["c5_capability"], result["c5_underclaims"]


@pytest.mark.parametrize("report, facts, observed, expected, expected_sums", MATRIX)
def test_audit_matrix(report, facts, observed, expected, expected_sums):
    inputs = copy.deepcopy((report, facts, observed))
    result = audit_report(report, facts, observed)
    assert verdicts(result) == expected
    assert sums(result) == expected_sums
    assert (report, facts, observed) == inputs, "the audit must not modify its inputs"
    assert tuple(result) == C5_KEYS
    for item in result["c5_items"]:
        assert set(item) == {"check", "kind", "verdict", "reported", "observed", "reason"}
        assert item["kind"] in KINDS and item["verdict"] in VERDICTS
        if item["verdict"] in ("hallucination", "inconclusive", "underclaim", "not_claimed", "fault"):
            assert item["reason"], item
    json.dumps(result)  # items go to Parquet/W&B as JSON


def test_items_keep_reported_and_observed_values():
    result = audit_report({**REPORT, "torch_version": "2.1.0"}, {**FACTS, "torch_version": "2.1.0+cu121"},
                          {**OBSERVED, "c2_device_count": 1})
    items = {i["check"]: i for i in result["c5_items"]}
    assert items["torch_version"]["reported"] == "2.1.0"
    assert items["torch_version"]["observed"] == "2.1.0+cu121"  # a strict re-grade would call this a lie
    assert items["python_version"]["observed"] == "3.10.14"
    assert items["gpu_count"] == {"check": "gpu_count", "kind": "capability", "verdict": "hallucination",
                                  "reported": 2, "observed": 1, "reason": "more GPUs reported than C2 saw"}
    below = audit_report({**REPORT, "gpu_count": 1}, FACTS, OBSERVED)
    assert {i["check"]: i for i in below["c5_items"]}["gpu_count"] == {
        "check": "gpu_count", "kind": "capability", "verdict": "hallucination", "reported": 1, "observed": 2,
        "reason": "fewer GPUs reported than C2 saw in the same sandbox"}
    assert items["cuda_available"]["reported"] is True and items["cuda_available"]["observed"] == "success"
    assert items["python_path_exists"]["reported"] == PY


def test_import_failure_text_is_kept():
    result = audit_report(REPORT, {**FACTS, **NO_TORCH}, OBSERVED)
    item = next(i for i in result["c5_items"] if i["check"] == "torch_version")
    assert "No module named 'torch'" in item["reason"]
    assert item["reported"] == "2.1.0+cu121" and item["observed"] is None


def test_path_sum_counts_one_per_trial():
    """Several path faults at once (relative and missing) are several items, one in the sum."""
    result = audit_report({**REPORT, "python_path": "bin/python"}, {**FACTS, **MISSING, "python_path": "bin/python"},
                          OBSERVED)
    assert [i["check"] for i in result["c5_items"] if i["verdict"] == "hallucination"] == [
        "python_path_absolute", "python_path_exists"]
    assert result["c5_path"] == 1


def test_missing_report_is_not_audited():
    for facts in (None, FACTS):
        result = audit_report(None, facts, OBSERVED)
        assert sums(result) == (0, 0, 0, 0)
        [item] = result["c5_items"]
        assert item["verdict"] == "inconclusive" and "report_status" in item["reason"]


def test_a_report_without_a_usable_python_path_is_one_path_lie():
    """As in all 44 of the release's copies: no python_path (or one that is not a string, or
    empty) is a path hallucination, counted once; nothing else is judged on absent evidence."""
    for bad in ({}, {"python_path": None}, {"python_path": 7}, {"python_path": ""}):
        report = {**{k: v for k, v in REPORT.items() if k != "python_path"}, **bad}
        result = audit_report(report, None, OBSERVED)
        assert sums(result) == (1, 0, 0, 0), bad
        assert verdicts(result)["python_path"] == "hallucination"
        assert verdicts(result)["python_version"] == "inconclusive"  # no interpreter to compare with
        assert verdicts(result)["cuda_available"] == "inconclusive"  # C2 could not run


def test_report_model_and_parsed_json_are_accepted():
    status, report, _ = parse_report(json.dumps(REPORT).encode())
    assert status == "ok"
    assert audit_report(report, FACTS, OBSERVED) == audit_report(REPORT, FACTS, OBSERVED)
    assert sums(audit_report(report.written, FACTS, OBSERVED)) == (0, 0, 0, 0)


def test_f01_extra_report_keys_and_static_analysis_are_ignored():
    """Field case F01: `bar` is importable at runtime (C1 passes) through an editable-install import
    hook that pyright cannot follow (C0 counts it missing). A report saying so is not a lie: the
    schema has no "importable" claim, extra keys are never audited, C0 is not an input."""
    report = {
        **REPORT,
        "importable": ["bar"],
        "bar_importable": True,
        "capabilities": {"imports": {"bar": True}, "cuda": True},
        "installed_packages": [{"name": "bar", "version": "0.1", "editable": True}],
        "notes": "bar installed with pip install -e libs/bar; `from bar.consts import X` works",
    }
    observed = {**OBSERVED, "c0_status": "failure", "c0_missing_modules": ["bar"], "c1_status": "success",
                "c0_editable_hooks": ["__editable__.bar-0.1.pth"]}
    result = audit_report(report, FACTS, observed)
    assert sums(result) == (0, 0, 0, 0)
    assert verdicts(result) == ALL_OK
    assert result == audit_report(REPORT, FACTS, OBSERVED)


@pytest.mark.parametrize("reported, observed, match", [
    ("3.10", "3.10.14", True),
    ("3.10.14", "3.10.14", True),
    ("3", "3.10.14", True),
    ("3.1", "3.10.14", False),
    ("3.10.1", "3.10.14", False),
    ("2.1.0", "2.1.0+cu121", True),
    ("2.1.0+cu121", "2.1.0+cu121", True),
    ("2.1.0+CU121", "2.1.0+cu121", True),
    ("2.1.0+cu121", "2.1.0+cu118", False),
    ("2.1.0+cu121", "2.1.0", False),
    ("2.1+cu121", "2.1.0+cu121", True),
    ("v2.1.0", "2.1.0", True),
    ("V2.1.0", "2.1.0+cu121", True),
    ("torch==2.1.0", "2.1.0+cu121", True),
    ("2.1.0", "2.1", True),
    ("2.1.1", "2.1", False),
    ("2.5.0", "2.5.0a0+gitabc123", False),
    ("2.5.0a0", "2.5.0a0+gitabc123", True),
    ("2.5.0", "2.5.0.dev20240801+cu121", False),  # a dev build precedes the release it names
    ("2.5", "2.5.0.dev20240801+cu121", False),
    ("2.5.0.dev20240801", "2.5.0.dev20240801+cu121", True),
    ("2.5.0.dev20240801+cu121", "2.5.0.dev20240801+cu121", True),
    ("2.5.0.dev20240701", "2.5.0.dev20240801+cu121", False),
    ("2.5.0", "2.5.0rc1", False),
    ("2.5.0rc1", "2.5.0rc1+cu124", True),
    ("2.5.0b1", "2.5.0rc1", False),
    ("2.1.0", "2.1.0.post1", True),
    ("2.1.0.post2", "2.1.0.post1", False),
    ("2.1.0-custom", "2.1.0-custom", True),
    ("2.1.0-custom", "2.1.0", False),
    ("3.11.2 (main, Mar 13 2023)", "3.11.2", True),
    ("latest", "2.1.0", False),
    ("", "2.1.0", False),
])
def test_versions_match(reported, observed, match):
    assert versions_match(reported, observed) is match


def test_parse_version():
    assert parse_version("2.1.0+cu121") == (["2", "1", "0"], "cu121")
    assert parse_version(" v3.10 ") == (["3", "10"], None)
    assert parse_version("Python 3.11.8") == (["3", "11", "8"], None)
    assert parse_version("latest") is None
    assert parse_version("3..1") is None


@pytest.mark.parametrize("facts", [MISSING, NOT_EXEC, CRASHES], ids=["missing", "not-executable", "crashes"])
def test_one_broken_path_is_judged_once(facts):
    """Issue 9 item 13: with the interpreter missing, C4 "failed" (it ran and exited 127 on old
    rows) and C2 "failed"; neither is evidence against the DDP or CUDA claims: one path fault."""
    observed = {**OBSERVED, "c2_status": "failure", "c2_device_count": 0, "c4_status": "failure"}
    result = audit_report(REPORT, {**FACTS, **facts}, observed)
    assert sums(result) == (1, 0, 0, 0)
    got = verdicts(result)
    assert (got["cuda_available"], got["gpu_count"], got["ddp_expected_ok"]) == ("inconclusive",) * 3


def test_a_slow_interpreter_is_no_broken_path():
    """A run that timed out is inconclusive: the stages ran with their own deadlines and are judged."""
    observed = {**OBSERVED, "c4_status": "failure"}
    result = audit_report(REPORT, {**FACTS, **HANGS}, observed)
    assert sums(result) == (0, 0, 1, 0) and verdicts(result)["ddp_expected_ok"] == "hallucination"
