"""The node's metering proxy as a Ray actor: one per node, sweep-scoped.

The driver creates `reb-ray-llm-proxy-<node_id>` on a node before the first trial of an LLM
agent goes there (`NodeProxies.ensure`: hard node affinity, no CPU reserved, `get_if_exists`),
in the namespace `reb-ray-llm-<job id>` (the driver's job: two sweeps on one cluster never share
a proxy). Trials find it by name (`RayProxyClient`, a reb_ray.trial.llm.ProxyClient)
and register over Ray. It is detached, so that the death of a slot worker never takes it along;
the driver removes every proxy of its job when the run ends (`stop_proxies`), so a proxy lives
as long as one sweep run (a driver killed with SIGKILL leaves them until `ray stop`). It hosts a
`ProxyServer` bound where the sandboxes reach it (the gateway of the sandboxes' Docker network,
inside the node's proxy port range on reb-ray's networks, whose host guard opens only that
range; loopback for the local sandbox).

The real keys (reb_ray.llm.keys): the proxy makes a key pair in its memory and gives the
driver its public half; the driver seals its values of the sweep's LLM key variables to it and
hands over the sealed box. Ray carries only ciphertext: no key is in a runtime_env, an actor's
arguments, the object store or a log, and none is in the environment of the proxy or of any
other worker. A trial's worker never has a key at all.
"""

from __future__ import annotations

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from reb_ray.errors import InfraError, first_line
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

        from reb_ray.llm.keys import KeyInbox

        self._args = (provider, network, prices_file)
        self._server = None
        self._error: tuple[str, str] | None = None
        self._lock = threading.Lock()  # calls run on up to max_concurrency threads: one server
        self._inbox = KeyInbox()
        self._keys: dict[str, str] = {}  # the real keys, in this process's memory only
        self._delivered = False

    def public_key(self) -> bytes:
        """The public half of this proxy's key pair: what the driver seals the keys to."""
        return self._inbox.public_key

    def accept_keys(self, sealed: dict) -> dict:
        """Opens the driver's sealed keys into the key table; answers the variable names only."""
        try:
            self._keys.update(self._inbox.open(sealed))
        except ValueError as exc:
            return {"error": [PROXY, str(exc)]}
        self._delivered = True
        return {"vars": sorted(self._keys)}

    def _start(self):
        with self._lock:
            return self._start_locked()

    def _start_locked(self):
        if self._server is None and self._error is None:
            from reb_ray.errors import RebRayError
            from reb_ray.llm.prices import price_table
            from reb_ray.llm.proxy import ProxyServer
            from reb_ray.trial.llm import proxy_host
            from reb_ray.trial.egress import proxy_ports

            provider, network, prices_file = self._args
            try:
                self._server = ProxyServer(host=proxy_host(provider, network), prices=price_table(prices_file),
                                           ports=proxy_ports(network), keys=self._keys).start()
            except RebRayError as exc:
                self._error = (PROXY, f"the node's LLM proxy cannot start: {exc}")
        return self._server

    def register(self, trial_key: str, upstream: str, real_key_env: str | None, limits: TrialLimits,
                 model: str | None) -> dict:
        from reb_ray.trial.llm import register_on

        if real_key_env and not self._delivered:  # made, but the driver's keys never came: a new proxy is due
            return {"error": [PROXY, "the node's LLM proxy has not received the sweep's keys from the driver"]}
        server = self._start()
        if server is None:
            return {"error": list(self._error or (PROXY, "the node's LLM proxy did not start"))}
        try:
            key, url = register_on(server, trial_key, upstream, real_key_env, limits, model)
        except InfraError as exc:
            return {"error": [exc.category, str(exc)]}
        return {"key": key, "url": url}

    def finish(self, trial_key: str) -> dict:
        from reb_ray.trial.llm import unregister_on

        if self._server is None:
            return {"error": [PROXY, f"the node's LLM proxy does not know trial {trial_key}"]}
        try:
            meter, log = unregister_on(self._server, trial_key)
        except InfraError as exc:
            return {"error": [exc.category, str(exc)]}
        return {"meter": meter, "log": log}

    def meter(self, trial_key: str) -> dict:
        from reb_ray.errors import RebRayError

        if self._server is None:
            return {"error": [PROXY, f"the node's LLM proxy does not know trial {trial_key}"]}
        try:
            return {"meter": self._server.meter(trial_key)}
        except RebRayError as exc:
            return {"error": [PROXY, str(exc)]}

    def url(self) -> str | None:
        server = self._start()
        return server.url if server is not None else None


class NodeProxies:
    """The driver's side: makes each node's proxy and hands it the keys, sealed.

    `keys`: the driver's values of the sweep's LLM key variables ({variable: key}; kept in the
    driver's memory, never pickled: `client()` is what travels to the trials). `provider`,
    `network`: the sandbox's, so the proxy binds where sandboxes reach it; `prices_file`: a
    user price table (a path on every node) or None. `runtime_env`: the proxy actor's (None:
    the job's, which tells workers where reb_ray is).
    """

    def __init__(self, keys: dict[str, str], provider: str, network: str, prices_file: str | None = None,
                 runtime_env: dict | None = None) -> None:
        self._keys = dict(keys)
        self._args = (provider, network, prices_file)
        self._runtime_env = runtime_env
        self._ready: set[str] = set()  # nodes whose proxy holds the keys

    def __repr__(self) -> str:  # never the keys
        return f"NodeProxies(vars={sorted(self._keys)}, nodes={len(self._ready)})"

    def __reduce__(self):
        raise TypeError("NodeProxies holds the real keys: it never leaves the driver (pass client())")

    def client(self) -> RayProxyClient:
        """What a trial gets: the way to its node's proxy, without any key."""
        return RayProxyClient()

    def ensure(self, node_ids) -> dict[str, str]:
        """Makes the proxy of each node in `node_ids` not served yet and hands it the keys (all
        nodes at once, waiting up to CALL_TIMEOUT_S). Returns {node id: why} for the nodes that
        failed (their trials' registrations then fail as `infra_llm_proxy`, retried; the next
        call tries those nodes again). Never raises."""
        todo = [n for n in dict.fromkeys(node_ids) if n not in self._ready]
        if not todo:
            return {}
        failed: dict[str, str] = {}
        actors = {}
        for node_id in todo:
            try:
                actors[node_id] = _create(node_id, self._args, self._runtime_env)
            except (ValueError, ray.exceptions.RayError) as exc:
                failed[node_id] = first_line(exc)
        from reb_ray.llm.keys import seal

        stage = {n: a.public_key.remote() for n, a in actors.items()}
        for phase in ("public_key", "accept_keys"):
            answers = {}
            for node_id, ref in stage.items():
                try:
                    answers[node_id] = ray.get(ref, timeout=CALL_TIMEOUT_S)
                except (ray.exceptions.RayError, TimeoutError) as exc:
                    failed[node_id] = f"the node's LLM proxy did not answer {phase}: {first_line(exc)}"
            if phase == "public_key":
                stage = {n: actors[n].accept_keys.remote(seal(public, self._keys)) for n, public in answers.items()}
            else:
                for node_id, answer in answers.items():
                    if "error" in answer:
                        failed[node_id] = answer["error"][1]
                    else:
                        self._ready.add(node_id)
        return failed

    def forget(self, node_id: str) -> None:
        """The node's proxy is to be made (or looked up) and given the keys again before its next trial."""
        self._ready.discard(node_id)


def _create(node_id: str, args: tuple, runtime_env: dict | None):
    options = dict(name=NAME_PREFIX + node_id, namespace=namespace(), get_if_exists=True, lifetime="detached",
                   scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=False))
    if runtime_env is not None:
        options["runtime_env"] = runtime_env
    return ProxyActor.options(**options).remote(*args)


class RayProxyClient:
    """A trial's handle on its node's ProxyActor (made on the driver, used in the trial's actor):
    it finds the proxy the driver made on this node by name, and holds no key."""

    def __init__(self) -> None:
        self._actor = None

    def __repr__(self) -> str:
        return "RayProxyClient()"

    def __getstate__(self) -> dict:
        return {}  # an actor handle found on one node is no use on another

    def __setstate__(self, state: dict) -> None:
        self._actor = None

    def _handle(self):
        if self._actor is None:
            node_id = ray.get_runtime_context().get_node_id()
            try:
                self._actor = ray.get_actor(NAME_PREFIX + node_id, namespace=namespace())
            except ValueError:
                raise InfraError(PROXY, f"no LLM proxy on node {node_id[:12]} (the driver makes one before "
                                        "the node's first LLM trial)") from None
        return self._actor

    def _call(self, method: str, *args, timeout_s: float = CALL_TIMEOUT_S) -> dict:
        handle = self._handle()
        try:
            answer = ray.get(getattr(handle, method).remote(*args), timeout=timeout_s)
        except (ray.exceptions.RayError, TimeoutError) as exc:
            raise InfraError(PROXY, f"the node's LLM proxy did not answer {method}: {first_line(exc)}") from None
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

    def meter(self, trial_key: str) -> dict:
        return self._call("meter", trial_key, timeout_s=10.0)["meter"]


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
