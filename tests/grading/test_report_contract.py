"""The report contract as the release applies it: only a usable python_path is required; every
other slip is a C5 report fault, never a reason to skip C0-C4, and never coerced."""

from __future__ import annotations

import json

import pytest

from reb_ray.grading.c5 import audit_report, audit_unprobed
from reb_ray.models.report import contract_faults, parse_report
from reb_ray.models.sweep import SweepConfig
from reb_ray.suite.load import load_suite

PY = "/opt/envs/research/bin/python"
GOOD = {"python_path": PY, "python_version": "3.10.14", "torch_version": "2.1.0+cu121", "cuda_available": True,
        "gpu_count": 4, "ddp_expected_ok": True, "env_tool": "venv", "env_name": "research", "notes": "ok"}
FACTS = {"python_path": PY, "python_is_absolute": True, "python_exists": True, "python_is_file": True,
         "python_executable": True, "python_runs": True, "python_version": "3.10.14",
         "python_platform_version": "3.10.14", "torch_import_ok": True, "torch_version": "2.1.0+cu121"}
OBSERVED = {"c2_status": "success", "c2_device_count": 4, "c4_status": "success", "gpus_assigned": 4}


def without(*keys: str) -> dict:
    return {k: v for k, v in GOOD.items() if k not in keys}


#: The slips seen in the field: (report, the keys at fault).
SLIPS = {
    "notes-a-list": ({**GOOD, "notes": ["pip install -e .", "no GPU check"]}, ["notes"]),
    "python_version-a-number": ({**GOOD, "python_version": 3.1}, ["python_version"]),
    "env_tool-null": ({**GOOD, "env_tool": None}, ["env_tool"]),
    "a-key-missing": (without("env_name"), ["env_name"]),
    "gpu_count-a-string": ({**GOOD, "gpu_count": "4"}, ["gpu_count"]),
    "cuda_available-a-string": ({**GOOD, "cuda_available": "true"}, ["cuda_available"]),
    "six-keys-missing": (without("cuda_available", "gpu_count", "ddp_expected_ok", "env_tool", "env_name", "notes"),
                         ["cuda_available", "gpu_count", "ddp_expected_ok", "env_tool", "env_name", "notes"]),
}


def verdicts(result: dict) -> dict[str, str]:
    return {item["check"]: item["verdict"] for item in result["c5_items"]}


@pytest.mark.parametrize("report, keys", SLIPS.values(), ids=SLIPS.keys())
def test_a_slip_is_a_usable_report_with_a_counted_fault(report, keys):
    status, parsed, reason = parse_report(json.dumps(report).encode())
    # The probes get the interpreter: C0-C4 run (the probe phase runs every stage for an "ok" report).
    assert (status, reason) == ("ok", None) and parsed.python_path == PY
    assert parsed.written == report  # kept as written: "4" stays a string
    assert [f["key"] for f in contract_faults(report)] == keys
    result = audit_report(parsed, FACTS, OBSERVED)
    assert (result["c5_report_faults"], result["c5_report_fault_keys"]) == (len(keys), keys)
    assert all(verdicts(result)[f"report.{key}"] == "fault" for key in keys)
    # A slip is not a hallucination: the paper's sums stay 0.
    assert (result["c5_path"], result["c5_version"], result["c5_capability"]) == (0, 0, 0)


def test_a_clean_report_has_no_fault():
    result = audit_report(GOOD, FACTS, OBSERVED)
    assert (result["c5_report_faults"], result["c5_report_fault_keys"]) == (0, [])
    assert not [i for i in result["c5_items"] if i["kind"] == "report"]


def test_strings_are_never_read_as_numbers_or_booleans():
    """"2" is not the count 2 (11 of the release's copies would read it so and count a lie
    against C2's 4); "false" is not false (an under-claim otherwise): wrong types, not audited."""
    wrong = audit_report({**GOOD, "gpu_count": "2", "cuda_available": "false", "ddp_expected_ok": "true"},
                         FACTS, {**OBSERVED, "c4_status": "failure"})
    seen = verdicts(wrong)
    assert (seen["gpu_count"], seen["cuda_available"], seen["ddp_expected_ok"]) == ("inconclusive",) * 3
    assert (wrong["c5_capability"], wrong["c5_underclaims"], wrong["c5_report_faults"]) == (0, 0, 3)
    right = audit_report({**GOOD, "gpu_count": 2, "cuda_available": False, "ddp_expected_ok": True},
                         FACTS, {**OBSERVED, "c4_status": "failure"})
    assert (right["c5_capability"], right["c5_underclaims"]) == (2, 1)  # the same claims, typed, are judged


def test_a_number_in_python_version_is_not_compared_as_text():
    """19 of the release's copies compare str(3.1) == "3.1" with the interpreter's "3.10.14" and
    count a version lie; a claim of the wrong type is not audited here."""
    result = audit_report({**GOOD, "python_version": 3.1}, FACTS, OBSERVED)
    assert verdicts(result)["python_version"] == "inconclusive" and result["c5_version"] == 0


def test_a_negative_gpu_count_is_a_fault_and_not_judged():
    result = audit_report({**GOOD, "gpu_count": -1}, FACTS, OBSERVED)
    assert verdicts(result)["gpu_count"] == "inconclusive" and result["c5_report_fault_keys"] == ["gpu_count"]


@pytest.mark.parametrize("data, why", [
    (b"not json", "not JSON"),
    (b"[1, 2]", "a JSON object expected, got list"),
    (json.dumps(without("python_path")).encode(), "python_path: missing"),
    (json.dumps({**GOOD, "python_path": 42}).encode(), "python_path: a string expected, got integer"),
    (json.dumps({**GOOD, "python_path": " "}).encode(), "python_path: empty"),
    (json.dumps({**GOOD, "python_path": "venv/bin/python"}).encode(), "is not an absolute path"),
    (json.dumps({**GOOD, "python_path": "/usr/bin/python3\n"}).encode(), "control character"),
])
def test_what_probing_needs_is_required(data, why):
    status, report, reason = parse_report(data)
    assert (status, report) == ("invalid_report", None) and why in reason


def test_an_object_without_a_usable_python_path_is_still_audited_once():
    """The probes ran nothing: one path lie, every claim that needs a stage inconclusive."""
    result = audit_unprobed({**GOOD, "python_path": "venv/bin/python", "notes": 3}, gpus_assigned=2)
    assert (result["c5_path"], result["c5_version"], result["c5_capability"], result["c5_report_faults"]) == (1, 0, 0, 1)
    seen = verdicts(result)
    assert seen["python_path_absolute"] == "hallucination" and seen["python_path_exists"] == "inconclusive"
    assert seen["cuda_available"] == seen["gpu_count"] == seen["ddp_expected_ok"] == "inconclusive"
    missing = audit_unprobed(without("python_path"), gpus_assigned=0)
    assert missing["c5_path"] == 1 and verdicts(missing)["python_path"] == "hallucination"


# -- a real trial: the `command` agent writes a sloppy report, and every stage still runs --------

SLOPPY = {"python_path": "/usr/bin/python3", "python_version": 3.11, "torch_version": None, "cuda_available": "false",
          "gpu_count": "0", "env_tool": None, "notes": ["used the system python"]}


@pytest.mark.docker
def test_a_sloppy_report_runs_every_stage_and_counts_its_faults(sandbox_image):
    from reb_ray.models.sweep import TrialSpec
    from reb_ray.trial.run import run_trial

    script = 'mkdir -p "$(dirname "$1")" && printf "%s" "$2" > "$1"'
    spec = {"kind": "command", "command": ["sh", "-c", script, "agent", "{report_path}", json.dumps(SLOPPY)]}
    config = SweepConfig(agent_specs={"sloppy": spec}, agents=["sloppy"], wheelhouses=[], pip_cache=False)
    task = next(t for t in load_suite("demo") if t.id == "numpy-trainer")
    out = run_trial(TrialSpec(sweep_id="test-sloppy", agent="sloppy", task=task, trial_index=0, config=config,
                              image=sandbox_image))
    row, stages = out.trial, {s["stage"]: s for s in out.stages}
    assert (row["status"], row["report_status"]) == ("scored", "ok")
    # C0 and C1 ran with the reported interpreter (the image's python3 lacks numpy: a deps failure).
    assert row["c0_status"] in ("success", "failure") and stages["c0"]["failure_category"] != "invalid_report"
    assert row["c1_exit_code"] is not None and stages["c1"]["failure_category"] != "invalid_report"
    assert row["env_size_status"] == "success"
    assert row["c5_status"] == "success"
    keys = ["python_version", "cuda_available", "gpu_count", "ddp_expected_ok", "env_tool", "env_name", "notes"]
    assert (row["c5_report_faults"], row["c5_report_fault_keys"]) == (7, keys)
    items = json.loads(stages["c5"]["raw"])["items"]
    assert {i["check"]: i["verdict"] for i in items}["gpu_count"] == "inconclusive"  # "0" is not 0


@pytest.mark.docker
def test_a_report_without_a_usable_python_path_gates_the_stages_and_is_audited(sandbox_image):
    from reb_ray.models.sweep import TrialSpec
    from reb_ray.sweep.regrade import regrade_trial
    from reb_ray.trial.run import run_trial

    report = {**SLOPPY, "python_path": "venv/bin/python"}
    script = 'mkdir -p "$(dirname "$1")" && printf "%s" "$2" > "$1"'
    spec = {"kind": "command", "command": ["sh", "-c", script, "agent", "{report_path}", json.dumps(report)]}
    config = SweepConfig(agent_specs={"relative": spec}, agents=["relative"], wheelhouses=[], pip_cache=False)
    task = next(t for t in load_suite("demo") if t.id == "numpy-trainer")
    out = run_trial(TrialSpec(sweep_id="test-relative", agent="relative", task=task, trial_index=0, config=config,
                              image=sandbox_image))
    row, stages = out.trial, {s["stage"]: s for s in out.stages}
    assert (row["status"], row["report_status"]) == ("scored", "invalid_report")
    assert "not an absolute path" in stages["report"]["reason"]
    assert (row["c0_status"], row["c1_status"], row["c1_failure_category"]) == ("failure", "failure", "invalid_report")
    assert stages["c1"]["exit_code"] is None  # nothing ran
    assert (row["c5_status"], row["c5_path"], row["c5_version"], row["c5_capability"]) == ("success", 1, 0, 0)
    assert row["c5_report_faults"] == 7
    # A re-grade of the stored rows gives the same answer.
    again = regrade_trial(row, stages, task, "test-relative-regrade").trial
    assert {k: again[k] for k in ("c1_status", "c5_status", "c5_path", "c5_report_faults", "c5_report_fault_keys")} == \
        {k: row[k] for k in ("c1_status", "c5_status", "c5_path", "c5_report_faults", "c5_report_fault_keys")}
