"""A trial's LLM side with no sandbox: TrialLlm over a real in-process proxy and a real scripted
endpoint, requests sent from here as an agent would send them."""

from __future__ import annotations

import pytest

from reb_ray.agents import get_agent
from reb_ray.agents.base import AgentRun
from reb_ray.errors import InfraError, RebRayError
from reb_ray.llm.apis import ANTHROPIC, CHAT
from reb_ray.llm.prices import price_table
from reb_ray.llm.scripted import ScriptedEndpoint, script_from
from reb_ray.trial.llm import LocalProxy, TrialLlm, check_llm_agent, llm_verdict, upstream_of
from reb_ray.models.agent import AgentSpec
from reb_ray.models.sweep import SweepConfig, TrialSpec
from reb_ray.suite.load import load_suite
from tests.llm.clients import post, request_body
from reb_ray.testing.llm_session import REAL_KEY, REAL_KEY_ENV

AGENT = "tests.helpers.scripted_agents:LlmScriptAgent"
MESSAGE = {"kind": "message", "text": "done", "usage": {"input_tokens": 1000, "output_tokens": 10}}


def _trial(endpoint: ScriptedEndpoint, model: str = "claude-sonnet-4-5", **spec) -> tuple[TrialLlm, TrialSpec]:
    agent_spec = {"kind": AGENT, "model": model, "base_url": endpoint.url, "key_env": REAL_KEY_ENV, **spec}
    config = SweepConfig(agent_specs={"llm": agent_spec}, agents=["llm"], sandbox="local", wheelhouses=[])
    trial = TrialSpec(sweep_id="s", agent="llm", task=load_suite("demo")[0], trial_index=0, config=config,
                      credentials={REAL_KEY_ENV: REAL_KEY, "OTHER_TOKEN": "tok-other-1234", "ALIAS": REAL_KEY})
    return TrialLlm(get_agent(trial.agent_spec), trial, None, "local"), trial


def _run(**extra) -> AgentRun:
    return AgentRun(exit_code=0, timed_out=False, wall_time_s=1.0, output="", **extra)


def test_upstream_is_the_base_url_without_v1():
    assert upstream_of(AgentSpec(name="c", kind="codex")) == "https://api.openai.com"
    assert upstream_of(AgentSpec(name="c", kind="claude_code")) == "https://api.anthropic.com"
    assert upstream_of(AgentSpec(name="c", kind="codex", base_url="http://10.0.0.5:8000/v1/")) == "http://10.0.0.5:8000"
    assert upstream_of(AgentSpec(name="c", kind="codex", base_url="http://h/openai")) == "http://h/openai"
    with pytest.raises(RebRayError, match="no base_url"):
        upstream_of(AgentSpec(name="mine", kind=AGENT))


def test_an_llm_trial_gets_a_stand_in_and_its_meter_and_never_its_key(real_key):
    with ScriptedEndpoint(script_from({"model": "claude-sonnet-4-5", "turns": [MESSAGE]})) as endpoint:
        llm, _ = _trial(endpoint)
        llm.open()
        try:
            access = llm.access
            assert access is not None and access.base_url.startswith("http://127.0.0.1:")
            assert access.api_key.startswith("sk-rebray-") and access.model == "claude-sonnet-4-5"
            # The spec's other credentials pass; the LLM key does not, by name nor by value.
            assert llm.sandbox_credentials() == {"OTHER_TOKEN": "tok-other-1234"}
            assert post(access.base_url, ANTHROPIC, request_body(ANTHROPIC, False), access.api_key).status == 200
            columns = llm.finish(_run(reported_usage={"input_tokens": 1000, "output_tokens": 10, "cost_usd": 0.004}), None)
        finally:
            llm.close()
        assert endpoint.session(REAL_KEY)["position"] == 1  # the upstream saw the real key
    assert columns["llm_requests"] == 1 and columns["input_tokens"] == 1000 and columns["output_tokens"] == 10
    assert columns["cost_usd"] == pytest.approx((1000 * 3 + 10 * 15) / 1e6) and columns["cost_source"] == "price_table"
    assert (columns["agent_reported_input_tokens"], columns["agent_reported_cost_usd"]) == (1000, 0.004)
    assert columns["trajectory_path"] is None  # no transcript, no artifacts


def test_an_agent_without_an_llm_keeps_its_credentials_and_a_baseline_spends_a_known_zero():
    """noop and heuristic call no model: 0 requests, tokens and USD are known (cost comparisons
    place them at $0); a `command` agent might call one behind the proxy's back: unknown, null."""
    from reb_ray.llm.usage import FIELDS

    nothing = {"trajectory_path": None, "agent_reported_input_tokens": None, "agent_reported_output_tokens": None,
               "agent_reported_cost_usd": None}
    for name, spec, spent in (("noop", "noop", True), ("heuristic", "heuristic", True),
                              ("cmd", {"kind": "command", "command": ["true"]}, False)):
        config = SweepConfig(agent_specs={name: spec} if isinstance(spec, dict) else {}, agents=[name],
                             sandbox="local", wheelhouses=[])
        trial = TrialSpec(sweep_id="s", agent=name, task=load_suite("demo")[0], trial_index=0, config=config,
                          credentials={"MY_KEY": "secret-1234"})
        llm = TrialLlm(get_agent(trial.agent_spec), trial, None, "local").open()
        assert llm.access is None and llm.sandbox_credentials() == {"MY_KEY": "secret-1234"}
        zero = {"llm_requests": 0, **dict.fromkeys(FIELDS, 0), "cost_usd": 0.0, "cost_source": "no_model"}
        assert llm.finish(_run(), None) == ({**nothing, **zero} if spent else nothing), name


@pytest.mark.parametrize(("turns", "report_ok", "verdict"), [
    ([{"kind": "error", "status": 429}], False, "infra_llm_rate_limit"),
    ([{"kind": "error", "status": 429}], True, None),  # a usable report: the probes judge it
    ([{"kind": "error", "status": 429}, MESSAGE], False, None),  # the CLI retried and went on: its own failure
    ([MESSAGE, {"kind": "error", "status": 503}], False, "infra_llm_unavailable"),
    ([{"kind": "error", "status": 401}], False, "infra_llm_auth"),
    ([{"kind": "error", "status": 402, "message": "budget exceeded"}], False, "infra_llm_budget"),
    ([{"kind": "error", "status": 400, "message": "messages: field required"}], False, None),  # the request's fault
])
def test_the_verdict_is_the_last_request_when_no_report_came(real_key, turns, report_ok, verdict):
    with ScriptedEndpoint(script_from({"model": "claude-sonnet-4-5", "turns": turns})) as endpoint:
        llm, _ = _trial(endpoint)
        llm.open()
        for _ in turns:
            post(llm.access.base_url, ANTHROPIC, request_body(ANTHROPIC, False), llm.access.api_key)
        columns = llm.finish(_run(), None)
        llm.close()
    found = llm_verdict(llm.log, report_ok)
    assert (found[0] if found else None) == verdict
    if verdict and not report_ok:
        with pytest.raises(InfraError) as err:
            llm.judge(None)
        assert err.value.category == verdict and "last LLM request failed" in str(err.value)
    if len(turns) == 1 and turns[0]["kind"] == "error":
        # Only error answers: nothing was generated or billed.
        assert (columns["input_tokens"], columns["output_tokens"], columns["cost_usd"]) == (0, 0, 0.0)


def test_the_per_trial_cost_limit_is_the_agents_limit_not_a_verdict(real_key):
    costly = {"kind": "message", "text": "x", "usage": {"input_tokens": 10000, "output_tokens": 10}}
    with ScriptedEndpoint(script_from({"model": "claude-sonnet-4-5", "turns": [costly, MESSAGE]})) as endpoint:
        llm, _ = _trial(endpoint, max_cost_usd=0.01)
        llm.open()
        answers = [post(llm.access.base_url, ANTHROPIC, request_body(ANTHROPIC, False), llm.access.api_key).status
                   for _ in range(2)]
        run = _run()
        columns = llm.finish(run, None)
        llm.close()
    assert answers == [200, 402]  # the proxy refused the second itself
    assert run.limit == "max_cost_usd=0.01" and llm_verdict(llm.log, False) is None
    assert columns["llm_requests"] == 2 and columns["llm_budget_failures"] == 0


def test_cost_is_null_for_an_unpriced_model_and_the_agents_figure_kept_beside(real_key):
    """F17: a model the table lacks has cost null, source unknown; the CLI's dollars stay in
    agent_reported_cost_usd only."""
    with ScriptedEndpoint(script_from({"model": "no-such-model-7", "turns": [MESSAGE]})) as endpoint:
        llm, _ = _trial(endpoint, model="no-such-model-7")
        llm.open()
        post(llm.access.base_url, ANTHROPIC, request_body(ANTHROPIC, False), llm.access.api_key)
        columns = llm.finish(_run(reported_usage={"cost_usd": 0.42}), None)
        llm.close()
    assert columns["input_tokens"] == 1000 and columns["llm_model"] == "no-such-model-7"
    assert (columns["cost_usd"], columns["cost_source"], columns["agent_reported_cost_usd"]) == (None, "unknown", 0.42)


def test_a_response_without_usage_falls_back_to_the_agents_dollars_for_a_priced_model(real_key):
    """A streamed Chat Completions answer without usage (the proxy told not to ask for it): the
    proxy's cost is unknown; for a model the table prices, the CLI's own figure is used."""
    chat = {"kind": "message", "text": "x", "usage": {"input_tokens": 1000, "output_tokens": 10}}
    with ScriptedEndpoint(script_from({"model": "gpt-5", "turns": [chat]})) as endpoint:
        proxy = LocalProxy("127.0.0.1")
        proxy.server.inject_stream_usage = False
        config = SweepConfig(agent_specs={"llm": {"kind": AGENT, "model": "gpt-5", "base_url": endpoint.url,
                                                  "key_env": REAL_KEY_ENV}}, agents=["llm"], sandbox="local", wheelhouses=[])
        trial = TrialSpec(sweep_id="s", agent="llm", task=load_suite("demo")[0], trial_index=0, config=config)
        llm = TrialLlm(get_agent(trial.agent_spec), trial, proxy, "local").open()
        body = request_body(CHAT, True)
        body.pop("stream_options")
        assert post(llm.access.base_url, CHAT, body, llm.access.api_key, style="bearer").status == 200
        columns = llm.finish(_run(reported_usage={"cost_usd": 0.0026}), None)
        proxy.close()
    assert columns["input_tokens"] is None  # the stream said nothing about tokens: unknown
    assert (columns["cost_usd"], columns["cost_source"]) == (0.0026, "agent_reported")


def test_a_key_missing_on_the_proxy_is_auth_never_retried(monkeypatch):
    monkeypatch.delenv(REAL_KEY_ENV, raising=False)
    with ScriptedEndpoint(script_from({"turns": [MESSAGE]})) as endpoint:
        llm, _ = _trial(endpoint)
        with pytest.raises(InfraError) as err:
            llm.open()
        llm.close()
    assert err.value.category == "infra_llm_auth" and REAL_KEY_ENV in str(err.value)


def test_the_sweep_checks_keys_and_prices_before_any_trial(monkeypatch):
    table = price_table()
    monkeypatch.delenv("REB_NOT_SET_KEY", raising=False)
    spec = AgentSpec(name="codex@gpt-5", kind="codex", model="gpt-5", key_env="REB_NOT_SET_KEY")
    with pytest.raises(RebRayError, match="its key variable REB_NOT_SET_KEY is not set"):
        check_llm_agent(spec, table, None)
    monkeypatch.setenv("REB_NOT_SET_KEY", "sk-x-1234")
    check_llm_agent(spec, table, 5.0)
    unpriced = spec.model_copy(update={"model": "mystery-1"})
    check_llm_agent(unpriced, table, None)  # no limit to enforce: an unknown cost is allowed
    with pytest.raises(RebRayError, match="--max-cost-usd needs a price for its model 'mystery-1'"):
        check_llm_agent(unpriced, table, 5.0)
    with pytest.raises(RebRayError, match="max_cost_usd needs a price for its model None"):
        check_llm_agent(spec.model_copy(update={"model": None, "max_cost_usd": 1.0}), table, None)


def test_the_failure_columns_say_how_the_attempt_ended_the_counts_keep_the_history(real_key):
    """A 429 the agent retried past: counted (llm_rate_limited 1), but the attempt's LLM use did
    not end in a failure, so llm_failure_category, llm_last_error and llm_retry_after_s are null;
    a 429 as the last request fills them."""
    rate_limited = {"kind": "error", "status": 429, "retry_after_s": 3}
    for turns, posts, failed in (([rate_limited, MESSAGE], 2, False), ([MESSAGE, rate_limited], 2, True)):
        with ScriptedEndpoint(script_from({"model": "claude-sonnet-4-5", "turns": turns})) as endpoint:
            llm, _ = _trial(endpoint)
            llm.open()
            try:
                for _ in range(posts):
                    post(llm.access.base_url, ANTHROPIC, request_body(ANTHROPIC, False), llm.access.api_key)
                columns = llm.finish(_run(), None)
            finally:
                llm.close()
        assert columns["llm_rate_limited"] == 1 and columns["llm_requests"] == 2
        expected = ("infra_llm_rate_limit", 3.0) if failed else (None, None)
        assert (columns["llm_failure_category"], columns["llm_retry_after_s"]) == expected
        assert (columns["llm_last_error"] is not None) == failed


def test_a_refused_key_is_answered_by_the_proxy_and_ends_the_agent_phase_in_seconds(real_key):
    """After one 401 on a model request, the proxy answers the trial's later model requests
    itself (the upstream sees one; a 400 the CLIs do not retry, recorded as auth), and the auth
    watch stops the agent within its interval."""
    import threading
    import time

    refused = {"kind": "error", "status": 401, "message": "invalid x-api-key", "repeat": 10}
    with ScriptedEndpoint(script_from({"model": "claude-sonnet-4-5", "turns": [refused]})) as endpoint:
        llm, _ = _trial(endpoint)
        llm.open()
        stopped = threading.Event()
        try:
            with llm.watch_auth(stopped.set, interval_s=0.1) as watch:
                first = time.monotonic()
                statuses = [post(llm.access.base_url, ANTHROPIC, request_body(ANTHROPIC, False), llm.access.api_key).status
                            for _ in range(3)]
                assert stopped.wait(5)
                waited = time.monotonic() - first
            columns = llm.finish(_run(), None)
        finally:
            llm.close()
        assert endpoint.session(REAL_KEY)["position"] == 1
    assert statuses == [401, 400, 400] and waited < 2  # a 400, which CLIs do not retry
    assert watch.fired == "HTTP 401: invalid x-api-key"
    assert columns["llm_auth_failures"] == 3 and columns["llm_failure_category"] == "infra_llm_auth"
    assert "not sent; the trial's key was refused earlier" in llm.log[-1]["error"]
