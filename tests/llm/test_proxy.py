"""The metering proxy for real: plain HTTP clients -> ProxyServer -> ScriptedEndpoint.

Counts equal the script's sums, bytes pass unchanged, the stand-in key is swapped and the real
key is never kept, failures are classified, the concurrency cap and the cost limit hold.
"""

from __future__ import annotations

import asyncio
import json
import time

import aiohttp
import pytest
from aiohttp import web

from reb_ray.errors import RebRayError
from reb_ray.llm.apis import ANTHROPIC, APIS, CHAT, RESPONSES
from reb_ray.background import BackgroundServer
from reb_ray.llm.meter import TrialLimits
from reb_ray.llm.proxy import ProxyServer
from reb_ray.llm.scripted import ScriptedEndpoint, script_from
from reb_ray.llm.usage import FIELDS, REPORTED_FIELDS
from tests.llm.clients import PATHS, post, post_many, request_body
from reb_ray.testing.llm_session import REAL_KEY, REAL_KEY_ENV
from tests.llm.conftest import THREE_TURNS


def run_script(proxy: ProxyServer, key: str, api: str, stream: bool, turns: int = 3, style: str = "x-api-key"):
    answers = [post(proxy.url, api, request_body(api, stream), key, style) for _ in range(turns)]
    assert [a.status for a in answers] == [200] * turns, [a.body[:200] for a in answers]
    return answers


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
@pytest.mark.parametrize("api", APIS)
def test_counts_equal_the_scripts_sums(api, stream, endpoint, proxy, real_key):
    key = proxy.register_trial("t1", endpoint.url, REAL_KEY_ENV)
    run_script(proxy, key, api, stream, style="x-api-key" if api == ANTHROPIC else "bearer")
    meter = proxy.meter("t1")
    expected = endpoint.script.total_usage().only(REPORTED_FIELDS[api])
    assert {f: meter[f] for f in FIELDS} == expected.as_dict()
    assert expected.input_tokens == 4500 and expected.output_tokens == 96  # the sums, by hand
    assert (meter["requests"], meter["responses_ok"], meter["responses_without_usage"]) == (3, 3, 0)
    assert meter["models"] == {"claude-sonnet-4-5": 3} and meter["failures"] == dict.fromkeys(meter["failures"], 0)
    log = proxy.request_log("t1")
    assert [(e["api"], e["stream"], e["status"]) for e in log] == [(api, stream, 200)] * 3
    assert sum(e["usage"]["output_tokens"] for e in log) == 96


def test_cost_is_the_price_tables_arithmetic(endpoint, proxy, real_key):
    key = proxy.register_trial("t1", endpoint.url, REAL_KEY_ENV, model="claude-sonnet-4-5")
    run_script(proxy, key, ANTHROPIC, stream=True)
    meter = proxy.meter("t1")
    # claude-sonnet-4-5: $3 input, $0.30 cache read, $3.75 cache write, $15 output per MTok.
    # uncached = 4500 - 3400 cached - 500 written = 600.
    by_hand = (600 * 3.00 + 3400 * 0.30 + 500 * 3.75 + 96 * 15.00) / 1e6
    assert meter["cost_usd"] == pytest.approx(by_hand, rel=1e-12) and meter["cost_source"] == "price_table"
    assert sum(e["cost_usd"] for e in proxy.request_log("t1")) == pytest.approx(by_hand, rel=1e-12)


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
@pytest.mark.parametrize("api", APIS)
def test_bytes_are_relayed_unchanged(api, stream, endpoint, proxy, real_key):
    key = proxy.register_trial("t1", endpoint.url, REAL_KEY_ENV)
    direct = [post(endpoint.url, api, request_body(api, stream), "direct-session") for _ in range(3)]
    proxied = run_script(proxy, key, api, stream)
    for d, p in zip(direct, proxied):
        assert p.body == d.body
        assert p.headers["Content-Type"] == d.headers["Content-Type"]
    assert len(proxied[0].body) > 300  # a real answer, not an empty one


def test_stand_in_key_is_swapped_and_the_real_key_is_never_kept(endpoint, proxy, real_key):
    key = proxy.register_trial("t1", endpoint.url, REAL_KEY_ENV)
    assert key.startswith("sk-rebray-") and REAL_KEY not in key
    post(proxy.url, ANTHROPIC, request_body(ANTHROPIC, True), key, "x-api-key")
    post(proxy.url, CHAT, request_body(CHAT, False), key, "bearer")
    post(proxy.url, RESPONSES, request_body(RESPONSES, True), key, "bearer")
    # The upstream saw the real key (its session), never the stand-in.
    assert endpoint.session(REAL_KEY)["position"] == 3
    assert endpoint.session(key) is None
    kept = json.dumps([proxy.meter("t1"), proxy.request_log("t1")])
    assert REAL_KEY not in kept and key not in kept


def test_real_key_echoed_in_an_upstream_error_is_masked(proxy, real_key):
    async def echo(request: web.Request) -> web.Response:
        return web.json_response({"error": {"message": f"Incorrect API key provided: {request.headers['x-api-key']}"}},
                                 status=401)

    def app() -> web.Application:
        application = web.Application()
        application.router.add_post("/v1/messages", echo)
        return application

    with BackgroundServer(app) as upstream:
        key = proxy.register_trial("t1", upstream.url, REAL_KEY_ENV)
        answer = post(proxy.url, ANTHROPIC, request_body(ANTHROPIC, False), key)
    assert answer.status == 401 and REAL_KEY not in answer.body.decode()
    assert "Incorrect API key" in answer.body.decode()
    meter = proxy.meter("t1")
    assert meter["failures"]["infra_llm_auth"] == 1 and REAL_KEY not in json.dumps(meter)


def test_failures_are_classified_with_retry_after(real_key):
    script = script_from({"turns": [
        {"kind": "error", "status": 429, "retry_after_s": 2},
        {"kind": "error", "status": 500},
        {"kind": "error", "status": 402},
        {"kind": "error", "status": 403, "message": "monthly budget exceeded for this key"},
        {"kind": "error", "status": 429, "message": "You exceeded your current quota", "error_type": "insufficient_quota"},
        {"kind": "error", "status": 400, "message": "messages: field required"},
        {"kind": "hang"},
        {"kind": "error", "status": 401},  # last: after a refused key the proxy sends nothing more
    ]})
    with ScriptedEndpoint(script) as endpoint, ProxyServer(read_timeout_s=1.0) as proxy:
        key = proxy.register_trial("t1", endpoint.url, REAL_KEY_ENV)
        direct_429 = post(endpoint.url, CHAT, request_body(CHAT, False), "direct")
        statuses = [post(proxy.url, CHAT, request_body(CHAT, False), key).status for _ in range(8)]
        meter, log = proxy.meter("t1"), proxy.request_log("t1")
    assert statuses == [429, 500, 402, 403, 429, 400, 504, 401]
    assert [e["category"] for e in log] == [
        "infra_llm_rate_limit", "infra_llm_unavailable", "infra_llm_budget", "infra_llm_budget",
        "infra_llm_budget", None, "infra_llm_unavailable", "infra_llm_auth"]
    assert log[0]["retry_after_s"] == 2.0 and log[0]["error"] == "rate limit exceeded (scripted)"
    assert log[6]["status"] is None and "no answer within 1 s" in log[6]["error"]
    assert meter["failures"] == {"infra_llm_rate_limit": 1, "infra_llm_unavailable": 2, "infra_llm_auth": 1,
                                 "infra_llm_budget": 3}
    assert meter["last_error"]["category"] == "infra_llm_auth" and meter["auth_failure"].startswith("HTTP 401: ")
    assert meter["status_counts"] == {"429": 2, "500": 1, "402": 1, "403": 1, "401": 1, "400": 1}
    assert meter["responses_ok"] == 0 and meter["input_tokens"] is None  # nothing reported: unknown
    assert direct_429.status == 429  # the direct session's first turn: same script, same answer


def test_unreachable_upstream_is_unavailable(proxy, real_key):
    key = proxy.register_trial("t1", "http://127.0.0.1:9", REAL_KEY_ENV)  # nothing listens on port 9
    answer = post(proxy.url, RESPONSES, request_body(RESPONSES, True), key)
    assert answer.status == 502 and "cannot reach upstream" in answer.json()["error"]["message"]
    entry = proxy.request_log("t1")[0]
    assert entry["category"] == "infra_llm_unavailable" and entry["status"] is None


def test_upstream_stream_cut_off_midway_is_unavailable_and_the_client_sees_it(proxy, real_key):
    async def cut(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b'event: message_start\ndata: {"type":"message_start","message":{"model":"m",'
                             b'"usage":{"input_tokens":10,"output_tokens":1}}}\n\n')
        request.transport.abort()
        return response

    def app() -> web.Application:
        application = web.Application()
        application.router.add_post("/v1/messages", cut)
        return application

    async def client(url: str, key: str) -> str:
        async with aiohttp.ClientSession() as session:
            async with session.post(url + PATHS[ANTHROPIC], json=request_body(ANTHROPIC, True),
                                    headers={"x-api-key": key}) as response:
                try:
                    await response.read()
                except aiohttp.ClientPayloadError:
                    return "truncated"
                return "complete"

    with BackgroundServer(app) as upstream:
        key = proxy.register_trial("t1", upstream.url, REAL_KEY_ENV)
        seen = asyncio.run(client(proxy.url, key))
    assert seen == "truncated"
    entry = proxy.request_log("t1")[0]
    assert entry["category"] == "infra_llm_unavailable" and "stream broke" in entry["error"]


def test_client_giving_up_on_a_hang_is_recorded_and_frees_the_upstream(real_key):
    script = script_from({"turns": [{"kind": "hang"}]})
    with ScriptedEndpoint(script) as endpoint, ProxyServer(read_timeout_s=60) as proxy:
        key = proxy.register_trial("t1", endpoint.url, REAL_KEY_ENV)
        with pytest.raises(asyncio.TimeoutError):
            post(proxy.url, ANTHROPIC, request_body(ANTHROPIC, True), key, timeout_s=0.5)
        deadline = time.monotonic() + 5
        while (not proxy.request_log("t1") or endpoint.in_flight) and time.monotonic() < deadline:
            time.sleep(0.05)
        entry = proxy.request_log("t1")[0]
        assert entry["client_disconnected"] and entry["category"] is None
        assert endpoint.in_flight == 0 and proxy.meter("t1")["in_flight"] == 0


def test_concurrency_cap_per_upstream_is_honoured(real_key):
    script = script_from({"turns": [{"kind": "message", "text": "ok", "delay_s": 0.3, "repeat": 2}]})
    with ScriptedEndpoint(script) as capped, ScriptedEndpoint(script) as free, ProxyServer() as proxy:
        # No real key: each trial's stand-in reaches the endpoint, one session per trial.
        keys = [proxy.register_trial(f"c{i}", capped.url, None, TrialLimits(max_concurrency=2)) for i in range(3)]
        free_keys = [proxy.register_trial(f"f{i}", free.url, None) for i in range(3)]
        start = time.monotonic()
        answers = post_many(proxy.url, [(CHAT, request_body(CHAT, False), k) for k in keys for _ in range(2)])
        capped_s = time.monotonic() - start
        post_many(proxy.url, [(CHAT, request_body(CHAT, False), k) for k in free_keys for _ in range(2)])
        waits = [e["wait_s"] for i in range(3) for e in proxy.request_log(f"c{i}")]
    assert [a.status for a in answers] == [200] * 6
    assert capped.max_in_flight == 2 and free.max_in_flight > 2  # the cap, and that it is what made the difference
    assert capped_s >= 0.85 and max(waits) >= 0.5  # three waves of 0.3 s


def test_cost_limit_refuses_further_requests(endpoint, proxy, real_key):
    # The first turn costs (200*3 + 700*0.3 + 300*3.75 + 45*15)/1e6 = $0.00261: over $0.002.
    key = proxy.register_trial("t1", endpoint.url, REAL_KEY_ENV, TrialLimits(max_cost_usd=0.002),
                               model="claude-sonnet-4-5")
    first = post(proxy.url, ANTHROPIC, request_body(ANTHROPIC, True), key)
    second = post(proxy.url, ANTHROPIC, request_body(ANTHROPIC, True), key)
    assert first.status == 200 and second.status == 402
    assert second.json()["error"]["type"] == "billing_error" and "budget exceeded" in second.json()["error"]["message"]
    meter = proxy.meter("t1")
    assert meter["cost_usd"] == pytest.approx(0.00261) and meter["cost_limit_reached"] is True
    assert (meter["requests"], meter["upstream_requests"], meter["budget_refusals"]) == (2, 1, 1)
    assert endpoint.session(REAL_KEY)["position"] == 1  # the refused request never left the proxy
    assert proxy.request_log("t1")[1]["refused"] is True


def test_chat_stream_without_include_usage_is_metered_by_asking_for_it(endpoint, real_key):
    body = request_body(CHAT, True)
    del body["stream_options"]
    for inject, expect_output in ((True, 45), (False, None)):
        with ProxyServer(inject_stream_usage=inject) as proxy:
            key = proxy.register_trial("t1", endpoint.url, REAL_KEY_ENV)
            answer = post(proxy.url, CHAT, body, key + "")
            meter, entry = proxy.meter("t1"), proxy.request_log("t1")[0]
        assert answer.status == 200 and meter["output_tokens"] == expect_output
        assert entry["injected_stream_usage"] is inject
        assert meter["cost_source"] == ("price_table" if inject else "unknown")
        assert meter["responses_without_usage"] == (0 if inject else 1)
        endpoint.set_script(REAL_KEY, script_from(THREE_TURNS))  # a fresh session for the second round


def test_a_trial_that_sent_nothing_spent_nothing(endpoint, proxy, real_key):
    proxy.register_trial("t1", endpoint.url, REAL_KEY_ENV)
    meter = proxy.meter("t1")
    assert {f: meter[f] for f in FIELDS} == dict.fromkeys(FIELDS, 0) and meter["cost_usd"] == 0.0


def test_unknown_key_is_refused_and_not_forwarded(endpoint, proxy, real_key):
    proxy.register_trial("t1", endpoint.url, REAL_KEY_ENV)
    for key in ("sk-rebray-guess", None):
        answer = post(proxy.url, ANTHROPIC, request_body(ANTHROPIC, False), key)
        assert answer.status == 401 and answer.json()["error"]["type"] == "authentication_error"
    assert endpoint.state()["sessions"] == {} and proxy.unknown_key_requests == 2


def test_unregister_returns_the_final_meter_and_the_key_stops_working(endpoint, proxy, real_key):
    key = proxy.register_trial("t1", endpoint.url, REAL_KEY_ENV)
    post(proxy.url, RESPONSES, request_body(RESPONSES, False), key)
    meter, log = proxy.unregister_trial("t1")
    assert meter["requests"] == 1 and len(log) == 1 and log[0]["status"] == 200
    assert post(proxy.url, RESPONSES, request_body(RESPONSES, False), key).status == 401
    with pytest.raises(RebRayError, match="not registered"):
        proxy.meter("t1")


def test_registration_errors_are_one_line(endpoint, proxy, real_key, monkeypatch):
    monkeypatch.delenv("REB_RAY_TEST_UNSET_KEY", raising=False)
    with pytest.raises(RebRayError, match="REB_RAY_TEST_UNSET_KEY is not set"):
        proxy.register_trial("t1", endpoint.url, "REB_RAY_TEST_UNSET_KEY")
    with pytest.raises(RebRayError, match="not an http"):
        proxy.register_trial("t1", "ftp://x", REAL_KEY_ENV)
    with pytest.raises(RebRayError, match="needs a price for model 'my-local-llm'"):
        proxy.register_trial("t1", endpoint.url, REAL_KEY_ENV, TrialLimits(max_cost_usd=1.0), model="my-local-llm")
    proxy.register_trial("t1", endpoint.url, REAL_KEY_ENV, TrialLimits(max_concurrency=4))
    with pytest.raises(RebRayError, match="already registered"):
        proxy.register_trial("t1", endpoint.url, REAL_KEY_ENV)
    with pytest.raises(RebRayError, match="already has max_concurrency=4, not 2"):
        proxy.register_trial("t2", endpoint.url, REAL_KEY_ENV, TrialLimits(max_concurrency=2))


def test_without_a_real_key_each_trial_keeps_its_own_scripted_session(endpoint, proxy):
    keys = [proxy.register_trial(f"t{i}", endpoint.url, None) for i in range(2)]
    for key in keys + keys:
        assert post(proxy.url, CHAT, request_body(CHAT, False), key, "bearer").status == 200
    assert [endpoint.session(k)["position"] for k in keys] == [2, 2]
    assert [proxy.meter(f"t{i}")["output_tokens"] for i in range(2)] == [45 + 31, 45 + 31]
