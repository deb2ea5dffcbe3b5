"""The network side of one trial attempt, as `run_trial` uses it.

`open`: a docker sandbox joins reb-ray's network for the sweep's policy (network.py:
`reb-ray-registries` under `registries`, `reb-ray-open` under `open`), after making sure it
exists and the host guard covers it (hostguard.py: the sandbox reaches no service of the node
but the proxies' port range on the gateway). Under `registries` it also starts this attempt's
egress proxy on that gateway inside the node's proxy port range (ports.py) and puts the proxy
variables in the sandbox's environment. A sweep that sets `network` explicitly (e.g.
`"bridge"`, Docker's default bridge) under `open` gets that network as it is, without a guard:
the user's choice, recorded in the row (`network_host_guard` false) and warned about at sweep
start (`unguarded_warning`). `attach`: after the container started, the proxy serves its
address only. `allow_llm`: the node's LLM proxy (`http://GATEWAY:PORT`) is allowed through the
egress proxy too, for a client that ignores NO_PROXY. `close`: stops the proxy, writes its
connection log as the artifact `network.jsonl.gz` (a summary line, then one line per request:
time, method, host, port, decision, reason) and returns the row's columns. Without an egress
proxy (`open`) `network_denied_count` stays null.

One proxy per attempt, in the attempt's own process: it holds no state shared between trials
(unlike the LLM proxy, which holds keys and per-upstream concurrency), it lives exactly as long
as its sandbox, and what it refused belongs to that attempt without any registration.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from reb_ray.errors import InfraError, RebRayError
from reb_ray.netpolicy.allowlist import HostPolicy
from reb_ray.netpolicy import guard_watch
from reb_ray.netpolicy.hostguard import ensure_guard
from reb_ray.netpolicy.network import OPEN, REGISTRIES, SandboxNetwork, by_name, ensure_network, proxy_env
from reb_ray.netpolicy.ports import sandbox_ports
from reb_ray.sandbox import capabilities_of

if TYPE_CHECKING:
    from reb_ray.agents.base import LlmAccess
    from reb_ray.trial.artifacts import TrialArtifacts
    from reb_ray.models.sweep import SweepConfig
    from reb_ray.netpolicy.proxy import EgressProxy
    from reb_ray.sandbox import Sandbox, SandboxConfig

NETWORK_LOG = "network"  # artifact name (.jsonl.gz)


#: The network of the harness's own containers (package-cache fill) and of a local sandbox's
#: config, when the sweep sets none: Docker's default bridge (they run no agent code).
HARNESS_NETWORK = "bridge"
_OPT_OUT = ('; or set network = "bridge" in the sweep config to run open-policy sandboxes on Docker\'s '
            "default bridge without the guard (recorded: network_host_guard = false)")


def sandbox_network(config: SweepConfig) -> str:
    """The Docker network the sweep's sandboxes join: reb-ray's guarded network for its policy
    (`reb-ray-registries` under `registries`; `reb-ray-open` under `open` when `network` is
    unset), else `config.network.name`. The node's LLM proxy binds on its gateway.

    A Harbor suite's LLM agents join `reb-ray-registries` whatever the policy: a task without
    internet must reach the LLM proxy and nothing else, which only the internal network gives
    (reb_ray.harbor.llm_agent); its other agents' sandboxes do not use this network."""
    from reb_ray.models.sweep import HARBOR_PREFIX

    own = capabilities_of(config.sandbox.provider).own_network
    if own and (config.network.policy == "registries" or config.suite.startswith(HARBOR_PREFIX)):
        return REGISTRIES.name
    if capabilities_of(config.sandbox.provider).own_network and config.network.name is None:
        return OPEN.name
    return config.network.name or HARNESS_NETWORK


def guarded_network(config: SweepConfig) -> SandboxNetwork | None:
    """The reb-ray network (with its host guard) the sweep's sandboxes join, or None: a provider
    without a network of its own (local: it shares the node's) or an explicit `network` that is
    not reb-ray's."""
    return by_name(sandbox_network(config)) if capabilities_of(config.sandbox.provider).own_network else None


def harness_network(config: SweepConfig) -> str:
    """The network of the harness's own containers: `config.network.name`, else HARNESS_NETWORK."""
    return config.network.name or HARNESS_NETWORK


def unguarded_warning(config: SweepConfig) -> str | None:
    """One line for the sweep's start when its sandboxes join a network of their own (docker)
    without the host guard (an explicit `network`), else None."""
    if not capabilities_of(config.sandbox.provider).own_network or guarded_network(config) is not None:
        return None
    return (f"warning: network = {config.network.name!r}: sandboxes join it without the host guard, so every service of "
            "the node listening on all addresses (Ray's GCS and dashboard, sshd) is reachable from them; "
            "rows record network_host_guard = false (unset `network` to guard them)")


def proxy_ports(network: str) -> range | None:
    """The ports a node proxy serving sandboxes on `network` binds inside: the node's range
    (ports.py) on reb-ray's networks, whose host guard opens only it; None (any) elsewhere.
    Raises RebRayError for a malformed range setting."""
    return sandbox_ports() if by_name(network) is not None else None


class TrialEgress:
    """The egress side of one attempt (module docstring). `policy` is the sweep's; `proxied`
    whether the sandbox gets an egress proxy (None: when the policy is `registries`; a Harbor
    task's LLM agent: when the task has internet)."""

    def __init__(self, config: SweepConfig, proxied: bool | None = None) -> None:
        self.policy = config.network.policy
        self.allow = list(config.network.allow)
        self.network = guarded_network(config)
        self.own_network = capabilities_of(config.sandbox.provider).own_network
        self.active = self.policy == "registries" if proxied is None else proxied
        self.proxy: EgressProxy | None = None
        self.gateway: str | None = None
        self.joined: str | None = None  # the row's sandbox_network, once decided
        self.host_guard: bool | None = None  # the row's network_host_guard: null until decided
        self.guard_watch: tuple | None = None  # the guard's watch held until close (guard_watch.py)

    def open(self, config: SandboxConfig) -> SandboxConfig:
        """The sandbox config to create the sandbox with. Raises InfraError (`infra_network_guard`)
        when the host guard cannot be installed, RebRayError (infra) when the network or the
        proxy cannot be made."""
        if self.network is None:  # the local sandbox, or the sweep's explicit network: as it is
            self.joined, self.host_guard = (config.network if self.own_network else None), False
            return config
        from reb_ray.sandbox.docker.docker_client import connect

        net, ports = self.network, sandbox_ports()
        self.gateway = ensure_network(connect(timeout=30), net)
        try:
            ensure_guard(net.bridge, self.gateway, ports, net.chain)  # before any sandbox of this trial exists
        except InfraError as exc:
            raise InfraError(exc.category, str(exc) + ("" if self.active else _OPT_OUT)) from None
        self.guard_watch = guard_watch.hold(net.bridge, self.gateway, ports, net.chain)  # re-asserted while sandboxes run
        self.joined, self.host_guard = net.name, True
        if not self.active:
            return config.model_copy(update={"network": net.name})
        from reb_ray.netpolicy.proxy import EgressProxy

        self.proxy = EgressProxy(HostPolicy(self.allow), host=self.gateway, ports=ports).start()
        env = {**config.env, **proxy_env(self.proxy.url, self.gateway)}
        return config.model_copy(update={"network": net.name, "env": env})

    def attach(self, sandbox: Sandbox) -> None:
        """Serve the started sandbox's address only. Raises RebRayError when it has none."""
        if self.proxy is None:
            return
        try:
            networks = sandbox.client.api.inspect_container(sandbox.id)["NetworkSettings"]["Networks"]  # type: ignore[attr-defined]
            ip = networks[REGISTRIES.name]["IPAddress"]
        except Exception as exc:  # noqa: BLE001 - the daemon's answer lacks it: no proxy could serve it
            raise RebRayError(f"sandbox {sandbox.id[:12]} has no address on {REGISTRIES.name}: {exc}") from None  # type: ignore[attr-defined]
        if not ip:
            raise RebRayError(f"sandbox has no address on {REGISTRIES.name}")
        self.proxy.serve_only(ip)

    def allow_llm(self, access: LlmAccess | None) -> None:
        """Allow the node's LLM proxy (the agent's base URL) through the egress proxy."""
        if self.proxy is None or access is None:
            return
        from urllib.parse import urlsplit

        url = urlsplit(access.base_url)
        if url.hostname and url.port:
            self.proxy.policy.add_exact(url.hostname, url.port)

    def close(self, artifacts: TrialArtifacts | None) -> dict:
        """Stops the proxy; returns `sandbox_network` and `network_host_guard` (null when `open`
        never decided them), `network_denied_count` and `network_log_path` (null when the
        policy is open, or the proxy never started). Never raises."""
        columns = {"sandbox_network": self.joined, "network_host_guard": self.host_guard}
        if self.guard_watch is not None:
            guard_watch.release(self.guard_watch)
            self.guard_watch = None
        if self.proxy is None:
            return columns
        proxy, self.proxy = self.proxy, None
        proxy.stop()
        records = proxy.records()
        summary = {"type": "summary", "policy": self.policy, "allow": self.allow, "proxy": proxy.url if proxy.port else None,
                   "client": proxy.client_ip, "allowed": proxy.allowed, "denied": proxy.denied,
                   "foreign": proxy.foreign, "records_dropped": proxy.dropped_records,
                   "note": "connections that bypass the proxy never leave the sandbox (no route, no outside DNS), "
                           "and the node's own services refuse them (the host guard's chain "
                           "REB-RAY-SANDBOX-IN); they fail there and are not seen here"}
        lines = [json.dumps(summary)] + [json.dumps({"type": "connection", **r}) for r in records]
        path = artifacts.write(NETWORK_LOG, ("\n".join(lines) + "\n").encode()) if artifacts is not None else None
        return {**columns, "network_denied_count": proxy.denied, "network_log_path": path}
