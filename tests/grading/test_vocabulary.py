"""The grading vocabulary: every category has its owner, every category the code emits is one,
an unknown category is an error (never the agent's), and rows get plain strings."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from reb_ray.grading.vocabulary import Category, Owner, Stage, Status, TrialStatus, UnknownCategory, owner_of, plain

PACKAGE = Path(__file__).resolve().parents[2] / "reb_ray"
#: `infra_` strings that are no category: the trial status and counters named after it.
NOT_CATEGORIES = {"infra_error", "infra_errors"}


@pytest.mark.parametrize("member", list(Category), ids=lambda c: c.value)
def test_every_category_has_its_owner(member):
    expected = Owner.INFRA if member.value.startswith("infra_") else \
        Owner.HARDWARE if member is Category.INSUFFICIENT_HARDWARE else Owner.AGENT
    assert member.owner is expected
    assert owner_of(member.value) is expected and owner_of(member) is expected
    assert Category(member.value) is member and member == member.value


def test_an_unknown_category_raises_naming_it():
    with pytest.raises(UnknownCategory, match="'infra_dsik_full'"):
        owner_of("infra_dsik_full")
    with pytest.raises(UnknownCategory, match="'unknown'"):
        owner_of("unknown")
    assert owner_of(None) is None


def _string_constants(path: Path) -> set[str]:
    return {node.value for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)}


def test_every_category_the_code_emits_is_a_member():
    from reb_ray.grading import categories, multi_gpu, record_types, unmeasured, witness
    from reb_ray.grading.c2 import C2_CATEGORIES
    from reb_ray.llm import failures
    from reb_ray.netpolicy import hostguard
    from reb_ray.testing import synthetic

    emitted = {*C2_CATEGORIES, *unmeasured.AGENT_GATES, unmeasured.ASSETS_MISSING, *failures.CATEGORIES, failures.PROXY,
               hostguard.CATEGORY, record_types.PROBE_RECORD_INVALID, witness.UNVERIFIED_RUN,
               multi_gpu.INSUFFICIENT_HARDWARE, *(name for name, _ in categories._PATTERNS), *synthetic._CATEGORY.values()}
    emitted |= {categories.classify_failure(code, timed_out, "") for code in (1, 127, 137, None) for timed_out in (False, True)}
    # Every `infra_*` string literal anywhere in the package (InfraError's first argument, the recorder's infra()).
    for path in PACKAGE.rglob("*.py"):
        emitted |= {s for s in _string_constants(path) if re.fullmatch(r"infra_[a-z_]+", s)} - NOT_CATEGORIES
    unknown = sorted(c for c in emitted if c not in {m.value for m in Category})
    assert unknown == []
    assert {"infra_network_guard", "infra_llm_proxy", "infra_toolbox", "pids_limit", "cpu_only_build"} <= emitted


def test_statuses_and_owners_are_the_schemas():
    from reb_ray.results import schema

    assert tuple(Status) == schema.STAGE_STATUSES
    assert tuple(TrialStatus) == schema.TRIAL_STATUSES
    assert set(Owner) == set(schema.FAILURE_OWNERS)
    stage_names = {f.name for f in schema.STAGES_SCHEMA}
    assert "stage" in stage_names and {s.value for s in Stage} >= {"agent", "report", "c0", "c5", "env_size"}


def test_verdicts_hand_rows_plain_strings():
    from reb_ray.grading.verdict import StageVerdict

    verdict = StageVerdict("c1", "failure", "exit code 1", "deps", row={"c1_status": Status.FAILURE,
                                                                        "c1_failure_category": Category.DEPS})
    assert verdict.stage is Stage.C1 and verdict.failure_category is Category.DEPS
    for value in (*verdict.trial_columns().values(), verdict.stage_fields()["status"], verdict.stage_fields()["failure_category"]):
        assert type(value) is str
    assert plain(Owner.AGENT) == "agent" and type(plain(Owner.AGENT)) is str and plain(3) == 3
    with pytest.raises(UnknownCategory, match="'dpes'"):
        StageVerdict("c1", "failure", None, "dpes")
