"""The node's metering proxy as a Ray actor: one per node, made by the driver and found by every
trial there, holding the real key (handed over sealed) in its memory only, gone when the run
stops it (real Ray)."""

from __future__ import annotations

import os

import pytest
import ray

from reb_ray.errors import InfraError
from reb_ray.llm.apis import ANTHROPIC
from reb_ray.llm.meter import TrialLimits
from reb_ray.llm.scripted import ScriptedEndpoint, script_from
from reb_ray.orchestrators.llm_proxy import NAME_PREFIX, NodeProxies, ProxyActor, RayProxyClient, namespace, stop_proxies
from tests.llm.clients import post, request_body

KEY_ENV = "REB_TEST_PROXY_ACTOR_KEY"
KEY = "sk-REALKEY-proxy-actor-5e4f3a2b1c0d"
MESSAGE = {"kind": "message", "text": "done", "usage": {"input_tokens": 1000, "output_tokens": 10}}


@pytest.fixture(scope="module")
def ray_local():
    assert KEY_ENV not in os.environ  # so the workers cannot inherit it from the driver
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


@ray.remote(num_cpus=0)
def _register_here(client: RayProxyClient, trial_key: str, upstream: str) -> dict:
    """What a trial's actor does: register through the client; also report this worker's view."""
    key, url = client.register(trial_key, upstream, KEY_ENV, TrialLimits(), "claude-sonnet-4-5")
    return {"key": key, "url": url, "worker_has_key": KEY_ENV in os.environ,
            "node_id": ray.get_runtime_context().get_node_id()}


@ray.remote(num_cpus=0)
def _finish_here(client: RayProxyClient, trial_key: str) -> tuple[dict, list[dict]]:
    return client.finish(trial_key)


def _proxies() -> list[str]:
    """Named actors alive in this job's proxy namespace."""
    import time

    time.sleep(0.5)  # a killed actor leaves the list a moment later
    return [a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if a["namespace"] == namespace()]


def _node() -> str:
    return ray.get_runtime_context().get_node_id()


def test_one_proxy_per_node_holds_the_key_the_trial_workers_never_do(ray_local):
    proxies = NodeProxies({KEY_ENV: KEY}, provider="local", network="bridge")
    assert KEY not in repr(proxies)
    with pytest.raises(TypeError, match="never leaves the driver"):  # not as an argument, not by accident
        ray.put(proxies)
    assert proxies.ensure([_node()]) == {} and proxies.ensure([_node()]) == {}  # made once, then known
    client = proxies.client()
    with ScriptedEndpoint(script_from({"model": "claude-sonnet-4-5", "turns": [MESSAGE, MESSAGE]})) as endpoint:
        first, second = ray.get([_register_here.remote(client, f"s/t{i}/1", endpoint.url) for i in (1, 2)])
        assert first["url"] == second["url"] and first["url"].startswith("http://127.0.0.1:")  # one proxy on the node
        assert first["key"] != second["key"] and not first["worker_has_key"]
        assert _proxies() == [NAME_PREFIX + first["node_id"]]
        answer = post(first["url"], ANTHROPIC, request_body(ANTHROPIC, False), first["key"])
        assert answer.status == 200 and endpoint.session(KEY) is not None  # the proxy swapped the real key in
        meter, log = ray.get(_finish_here.remote(client, "s/t1/1"))
    assert meter["requests"] == 1 and meter["input_tokens"] == 1000 and len(log) == 1
    assert KEY not in repr(meter) + repr(log)
    with pytest.raises(InfraError) as err:  # finished: unregistered
        ray.get(_finish_here.remote(client, "s/t1/1"))
    assert err.value.category == "infra_llm_proxy"
    assert stop_proxies() == [NAME_PREFIX + first["node_id"]]
    assert _proxies() == []


def test_a_key_the_driver_lacks_is_an_auth_failure_of_the_trial(ray_local):
    proxies = NodeProxies({}, provider="local", network="bridge")
    assert proxies.ensure([_node()]) == {}
    with pytest.raises(InfraError) as err:
        ray.get(_register_here.remote(proxies.client(), "s/t9/1", "http://127.0.0.1:9"))
    assert err.value.category == "infra_llm_auth" and KEY_ENV in str(err.value)
    stop_proxies()


def test_a_missing_proxy_or_one_without_the_drivers_keys_is_a_proxy_failure_and_is_made_again(ray_local):
    """No proxy on the node, or one the driver never gave the keys (made behind its back):
    `infra_llm_proxy` (retried); after `forget`, `ensure` gives the node's proxy the keys."""
    client = NodeProxies({KEY_ENV: KEY}, provider="local", network="bridge").client()
    with pytest.raises(InfraError) as err:
        ray.get(_register_here.remote(client, "s/t7/1", "http://127.0.0.1:9"))
    assert err.value.category == "infra_llm_proxy" and "no LLM proxy on node" in str(err.value)

    ProxyActor.options(name=NAME_PREFIX + _node(), namespace=namespace(), lifetime="detached").remote(
        "local", "bridge", None)
    with pytest.raises(InfraError) as err:
        ray.get(_register_here.remote(client, "s/t7/2", "http://127.0.0.1:9"))
    assert err.value.category == "infra_llm_proxy" and "has not received the sweep's keys" in str(err.value)

    proxies = NodeProxies({KEY_ENV: KEY}, provider="local", network="bridge")
    proxies.ensure([_node()])
    proxies.forget(_node())
    assert proxies.ensure([_node()]) == {}  # the same actor (get_if_exists), now with the keys
    assert ray.get(_register_here.remote(proxies.client(), "s/t7/3", "http://127.0.0.1:9"))["key"].startswith("sk-rebray-")
    stop_proxies()
