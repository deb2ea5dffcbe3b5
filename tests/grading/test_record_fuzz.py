"""Property-based fuzzing of the probe records the graders read back (issue 11, item 5).

A probe's record is a JSON file the probe wrote inside the sandbox, with the agent's
interpreter (a sitecustomize of the agent's can rewrite it), so any JSON object may come back.
Property: every grader returns a verdict with a known status for any such object, its values
fit their typed Parquet columns, and the C5 audit counts stay in their ranges; none raises (a
raise would turn the agent's doing into an infrastructure row, a wrong type would lose the row).
"""

from __future__ import annotations

import inspect
import re

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reb_ray.grading import c0, c2, c5, startup
from reb_ray.grading.c0 import grade_c0
from reb_ray.grading.c2 import grade_c2
from reb_ray.grading.c5 import audit_report
from reb_ray.grading.startup import PYTHON_PATH_KINDS, grade_startup
from reb_ray.results.schema import STAGE_STATUSES, TRIALS_SCHEMA

scalars = (st.none() | st.booleans() | st.integers(min_value=-2**70, max_value=2**70) | st.floats(allow_nan=True)
           | st.text(max_size=30) | st.sampled_from(["success", "failure", "timeout", "insufficient_hardware", "",
                                                     "/proc/self/environ", "\x1b[2J", "12.1", "sm_90"]))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner,
                                                                                          max_size=4), max_leaves=16)


def keys_read_by(module) -> list[str]:
    """Every record key the grader module reads (`raw.get("k")`, `raw["k"]`, `facts.get(...)`),
    so the generated records reach its deep paths; found in its source, so a new key is covered."""
    source = inspect.getsource(module)
    return sorted(set(re.findall(r"""(?:raw|facts|report|record|\w+)(?:\.get\(|\[)["']([a-z_0-9]+)["']""", source)))


def records(keys: list[str]):
    """Dicts with the grader's own keys (so the deep paths are reached) and stray ones."""
    return st.dictionaries(st.sampled_from(keys) | st.text(max_size=8), values, max_size=8)


SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def fits_the_trials_schema(result: dict) -> None:
    """The result's row columns convert to their TRIALS_SCHEMA types (raises if one does not)."""
    cols = {k: v for k, v in result.items() if k in TRIALS_SCHEMA.names}
    pa.Table.from_pylist([cols], schema=pa.schema([TRIALS_SCHEMA.field(k) for k in cols]))


@SETTINGS
@given(raw=records(keys_read_by(c0)), baseline=st.none() | st.integers(min_value=0, max_value=5000))
def test_c0_grades_any_record(raw, baseline):
    result = grade_c0(raw, baseline)
    assert result["c0_status"] in STAGE_STATUSES
    fits_the_trials_schema(result)


@SETTINGS
@given(raw=records(keys_read_by(c2)))
def test_c2_grades_any_record(raw):
    result = grade_c2(raw)
    assert result["c2_status"] in STAGE_STATUSES
    fits_the_trials_schema(result)


@SETTINGS
@given(raw=st.none() | records(keys_read_by(startup)), pythonstartup=st.none() | st.text(max_size=10),
       files=st.none() | st.lists(st.text(max_size=8), max_size=8), hits=st.none() | st.lists(st.text(max_size=8), max_size=4))
def test_startup_grades_any_record(raw, pythonstartup, files, hits):
    result = grade_startup(raw, pythonstartup=pythonstartup, repo_modified_files=files, trajectory=hits)
    assert result["python_path_kind"] in (*PYTHON_PATH_KINDS, None)
    assert isinstance(result["suspicious_actions"], list)
    fits_the_trials_schema(result)


@SETTINGS
@given(report=st.builds(dict, python_path=st.text(max_size=20), python_version=st.none() | st.text(max_size=8),
                        torch_version=st.none() | st.text(max_size=8), cuda_available=st.none() | st.booleans(),
                        gpu_count=st.none() | st.integers(0, 8), ddp_expected_ok=st.none() | st.booleans()),
       facts=st.none() | records(keys_read_by(c5)),
       c2=st.sampled_from(["success", "failure", "not_run", None]), count=st.none() | st.integers(-1, 16))
def test_c5_audits_any_facts_record(report, facts, c2, count):
    """The report was validated by parse_report (its own fuzz test); the facts record was not."""
    observed = {"c2_status": c2, "c2_device_count": count, "c4_status": "not_run", "gpus_assigned": 2}
    c5 = audit_report(report, facts, observed)
    assert c5["c5_path"] in (0, 1) and 0 <= c5["c5_version"] <= 2 and 0 <= c5["c5_capability"] <= 3
