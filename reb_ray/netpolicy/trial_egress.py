"""The network policy of one trial attempt, as reb_ray/trial.py uses it (issue 11, item 4).

`open`: for `network_policy = "registries"` (docker sandbox), makes sure the node's internal
network exists and the host guard covers it (hostguard.py: the sandbox reaches no service of
the node but the proxies), starts this attempt's egress proxy on its gateway inside the
node's proxy port range (ports.py), and returns the sandbox
config moved onto that network with the proxy variables in its environment. `attach`: after
the container started, the proxy serves its address only. `allow_llm`: the node's LLM proxy
(`http://GATEWAY:PORT`) is allowed through the egress proxy too, for a client that ignores
NO_PROXY. `close`: stops the proxy, writes its connection log as the artifact
`network.jsonl.gz` (a summary line, then one line per request: time, method, host, port,
decision, reason) and returns the row's columns. Policy `open` does nothing and leaves
`network_denied_count` null.

One proxy per attempt, in the attempt's own process: it holds no state shared between trials
(unlike the LLM proxy, which holds keys and per-upstream concurrency), it lives exactly as long
as its sandbox, and what it refused belongs to that attempt without any registration.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from reb_ray.errors import RebRayError
from reb_ray.netpolicy.allowlist import HostPolicy
from reb_ray.netpolicy.hostguard import ensure_guard
from reb_ray.netpolicy.network import BRIDGE_NAME, NETWORK_NAME, ensure_network, proxy_env
from reb_ray.netpolicy.ports import sandbox_ports

if TYPE_CHECKING:
    from reb_ray.agents.base import LlmAccess
    from reb_ray.artifacts import TrialArtifacts
    from reb_ray.models.sweep import SweepConfig
    from reb_ray.netpolicy.proxy import EgressProxy
    from reb_ray.sandbox import Sandbox, SandboxConfig

NETWORK_LOG = "network"  # artifact name (.jsonl.gz)


def sandbox_network(config: SweepConfig) -> str:
    """The Docker network the sweep's sandboxes join: the node's internal network under
    `registries`, else `config.network`. The node's LLM proxy binds on its gateway."""
    return NETWORK_NAME if config.network_policy == "registries" and config.sandbox == "docker" else config.network


def proxy_ports(network: str) -> range | None:
    """The ports a node proxy serving sandboxes on `network` binds inside: the node's range
    (ports.py) on the internal network, whose host guard opens only it; None (any) elsewhere.
    Raises RebRayError for a malformed range setting."""
    return sandbox_ports() if network == NETWORK_NAME else None


class TrialEgress:
    """The egress side of one attempt (module docstring). `policy` is the sweep's."""

    def __init__(self, config: SweepConfig) -> None:
        self.policy = config.network_policy
        self.allow = list(config.network_allow)
        self.active = self.policy == "registries"
        self.proxy: EgressProxy | None = None
        self.gateway: str | None = None

    def open(self, config: SandboxConfig) -> SandboxConfig:
        """The sandbox config to create the sandbox with. Raises InfraError (`infra_network_guard`)
        when the host guard cannot be installed, RebRayError (infra) when the network or the
        proxy cannot be made."""
        if not self.active:
            return config
        from reb_ray.netpolicy.proxy import EgressProxy
        from reb_ray.sandbox.docker_client import connect

        ports = sandbox_ports()
        self.gateway = ensure_network(connect(timeout=30))
        ensure_guard(BRIDGE_NAME, self.gateway, ports)  # before any sandbox of this trial exists
        self.proxy = EgressProxy(HostPolicy(self.allow), host=self.gateway, ports=ports).start()
        env = {**config.env, **proxy_env(self.proxy.url, self.gateway)}
        return config.model_copy(update={"network": NETWORK_NAME, "env": env})

    def attach(self, sandbox: Sandbox) -> None:
        """Serve the started sandbox's address only. Raises RebRayError when it has none."""
        if self.proxy is None:
            return
        try:
            networks = sandbox.client.api.inspect_container(sandbox.id)["NetworkSettings"]["Networks"]  # type: ignore[attr-defined]
            ip = networks[NETWORK_NAME]["IPAddress"]
        except Exception as exc:  # noqa: BLE001 - the daemon's answer lacks it: no proxy could serve it
            raise RebRayError(f"sandbox {sandbox.id[:12]} has no address on {NETWORK_NAME}: {exc}") from None  # type: ignore[attr-defined]
        if not ip:
            raise RebRayError(f"sandbox has no address on {NETWORK_NAME}")
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
        """Stops the proxy; returns `network_denied_count` and `network_log_path` (null when
        the policy is open, or the proxy never started). Never raises."""
        if self.proxy is None:
            return {}
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
        return {"network_denied_count": proxy.denied, "network_log_path": path}
