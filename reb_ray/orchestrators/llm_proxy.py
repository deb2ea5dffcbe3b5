"""The node's metering proxy as a Ray actor (issue 10, item 5): one per node, started by the
node's workers, sweep-scoped.

The first trial of an LLM agent on a node creates `reb-ray-llm-proxy-<node_id>` there (hard
node affinity, no CPU reserved, `get_if_exists`, so every later trial on the node finds the
same one), in the namespace `reb-ray-llm-<job id>` (the driver's job: two sweeps on one cluster
never share a proxy). It is detached because its creator, a slot worker, may die or be replaced
while other trials of the node still use the proxy; the driver removes every proxy of its job when the run ends (`stop_proxies`), so a proxy
lives as long as one sweep run (a driver killed with SIGKILL leaves them until `ray stop`). It hosts a `ProxyServer` bound where the sandboxes
reach it (the gateway of the sandboxes' Docker network, inside the node's proxy port range on
reb-ray's networks, whose host guard opens only that range; loopback for the local sandbox); trials register over Ray (`RayProxyClient`, a
reb_ray.llm.trial_access.ProxyClient).

The real keys: the driver's values of the sweep's LLM key variables go into this actor's
`runtime_env` env_vars only; no trial actor, and so no sandbox, ever has them in its
environment. The proxy reads them from its own environment per request.
"""

from __future__ import annotations

import os

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from reb_ray.errors import InfraError
from reb_ray.llm.failures import PROXY
from reb_ray.llm.meter import TrialLimits

NAME_PREFIX = "reb-ray-llm-proxy-"
CALL_TIMEOUT_S = 60.0


def namespace() -> str:
    """The Ray namespace of this job's proxies (the same in the driver and all its workers)."""
    return f"reb-ray-llm-{ray.get_runtime_context().get_job_id()}"


@ray.remote(num_cpus=0, max_concurrency=64)
class ProxyActor:
    """Hosts the node's ProxyServer. Methods return plain values: {"error": [category, message]}
    instead of raising, so the caller can raise InfraError with its category."""

    def __init__(self, provider: str, network: str, prices_file: str | None) -> None:
        import threading

        self._args = (provider, network, prices_file)
        self._server = None
        self._error: tuple[str, str] | None = None
        self._lock = threading.Lock()  # calls run on up to max_concurrency threads: one server

    def _start(self):
        with self._lock:
            return self._start_locked()

    def _start_locked(self):
        if self._server is None and self._error is None:
            from reb_ray.errors import RebRayError
            from reb_ray.llm.prices import price_table
            from reb_ray.llm.proxy import ProxyServer
            from reb_ray.llm.trial_access import proxy_host
            from reb_ray.netpolicy.trial_egress import proxy_ports

            provider, network, prices_file = self._args
            try:
                self._server = ProxyServer(host=proxy_host(provider, network), prices=price_table(prices_file),
                                           ports=proxy_ports(network)).start()
            except RebRayError as exc:
                self._error = (PROXY, f"the node's LLM proxy cannot start: {exc}")
        return self._server

    def register(self, trial_key: str, upstream: str, real_key_env: str | None, limits: TrialLimits,
                 model: str | None) -> dict:
        from reb_ray.llm.trial_access import register_on

        server = self._start()
        if server is None:
            return {"error": list(self._error or (PROXY, "the node's LLM proxy did not start"))}
        try:
            key, url = register_on(server, trial_key, upstream, real_key_env, limits, model)
        except InfraError as exc:
            return {"error": [exc.category, str(exc)]}
        return {"key": key, "url": url}

    def finish(self, trial_key: str) -> dict:
        from reb_ray.llm.trial_access import unregister_on

        if self._server is None:
            return {"error": [PROXY, f"the node's LLM proxy does not know trial {trial_key}"]}
        try:
            meter, log = unregister_on(self._server, trial_key)
        except InfraError as exc:
            return {"error": [exc.category, str(exc)]}
        return {"meter": meter, "log": log}

    def url(self) -> str | None:
        server = self._start()
        return server.url if server is not None else None


class RayProxyClient:
    """A trial's handle on its node's ProxyActor (made on the driver, used in the trial's actor).

    `env` holds the driver's values of the sweep's LLM key variables: they reach only the
    actor's runtime_env. `provider`, `network`: the sandbox's, so the proxy binds where
    sandboxes reach it; `prices_file`: a user price table (a path on every node) or None.
    """

    def __init__(self, env: dict[str, str], provider: str, network: str, prices_file: str | None = None) -> None:
        self._env, self._provider, self._network, self._prices = dict(env), provider, network, prices_file
        self._actor = None

    def __repr__(self) -> str:  # never the keys
        return f"RayProxyClient(vars={sorted(self._env)}, provider={self._provider!r}, network={self._network!r})"

    def _handle(self):
        if self._actor is None:
            node_id = ray.get_runtime_context().get_node_id()
            env = dict(self._env)
            if os.environ.get("PYTHONPATH"):  # the job's source checkout, as its workers import it
                env.setdefault("PYTHONPATH", os.environ["PYTHONPATH"])
            self._actor = ProxyActor.options(
                name=NAME_PREFIX + node_id, namespace=namespace(), get_if_exists=True, lifetime="detached",
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=False),
                runtime_env={"env_vars": env},
            ).remote(self._provider, self._network, self._prices)
        return self._actor

    def _call(self, method: str, *args) -> dict:
        try:
            answer = ray.get(getattr(self._handle(), method).remote(*args), timeout=CALL_TIMEOUT_S)
        except (ray.exceptions.RayError, TimeoutError) as exc:
            raise InfraError(PROXY, f"the node's LLM proxy did not answer {method}: "
                                    f"{(str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]}") from None
        if "error" in answer:
            raise InfraError(*answer["error"])
        return answer

    def register(self, trial_key: str, upstream: str, real_key_env: str | None, limits: TrialLimits,
                 model: str | None) -> tuple[str, str]:
        answer = self._call("register", trial_key, upstream, real_key_env, limits, model)
        return answer["key"], answer["url"]

    def finish(self, trial_key: str) -> tuple[dict, list[dict]]:
        answer = self._call("finish", trial_key)
        return answer["meter"], answer["log"]


def stop_proxies() -> list[str]:
    """Kills every node proxy of this job's namespace (the end of a run); returns their names.
    Never raises."""
    stopped = []
    try:
        ours = namespace()
        names = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
                 if a.get("namespace") == ours and str(a.get("name", "")).startswith(NAME_PREFIX)]
    except Exception:  # noqa: BLE001 - cleanup must not hide the run's result
        return stopped
    for name in names:
        try:
            ray.kill(ray.get_actor(name, namespace=ours))
            stopped.append(name)
        except (ValueError, ray.exceptions.RayError):
            pass
    return sorted(stopped)
