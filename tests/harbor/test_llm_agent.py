"""The LLM CLI agents on Harbor tasks: which kinds a Harbor sweep takes, and the network they get.

The real CLI on a real Harbor task, metered through the real proxy, is tests/harbor/test_sweep.py."""

from __future__ import annotations

import pytest

from reb_ray.errors import RebRayError
from reb_ray.harbor.llm_agent import LLM_KINDS, REPORT_PATH
from reb_ray.harbor.sweep import check_agents
from reb_ray.harbor.trial import VERIFIER_DIR
from reb_ray.models.sweep import SweepConfig
from reb_ray.trial.egress import TrialEgress, sandbox_network


def _config(suite: str, **agents: dict) -> SweepConfig:
    return SweepConfig(suite=suite, agents=list(agents) or ["noop"], agent_specs=agents)


def test_the_llm_clis_run_harbor_tasks_and_other_kinds_are_refused_in_one_line():
    specs = {kind: {"kind": kind, "model": "m", "base_url": "http://127.0.0.1:9"} for kind in LLM_KINDS}
    check_agents(_config("harbor:/tasks", **specs))
    with pytest.raises(RebRayError) as err:
        check_agents(_config("harbor:/tasks", nx={"kind": "nexau", "model": "m", "base_url": "http://127.0.0.1:9"}))
    text = str(err.value)
    assert "\n" not in text and "'nx'" in text and "kind nexau" in text and "claude_code" in text


def test_a_harbor_suites_llm_sandboxes_join_the_internal_network_whatever_the_policy():
    assert sandbox_network(_config("harbor:/tasks")) == "reb-ray-registries"
    assert sandbox_network(_config("demo")) == "reb-ray-open"  # a reb-ray suite keeps its policy's network
    harbor = _config("harbor:/tasks")
    # Without internet no egress proxy (only the node's proxies are reachable); with it, the allow-list's.
    assert TrialEgress(harbor, proxied=False).active is False
    assert TrialEgress(harbor, proxied=True).active is True
    assert TrialEgress(_config("demo")).active is False  # the policy decides when nothing is said


def test_the_report_path_is_out_of_the_verifiers_way():
    assert not REPORT_PATH.startswith(VERIFIER_DIR) and not REPORT_PATH.startswith("/tests")
