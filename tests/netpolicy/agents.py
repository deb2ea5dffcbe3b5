"""A small real agent for the network-policy tests: it tries every way out of its sandbox."""

from __future__ import annotations

import time

from reb_ray.agents.base import Agent, AgentContext, AgentRun

# Each attempt prints `net: NAME ok|reached|failed: ...`; the report names the system python.
_SCRIPT = r"""
echo "net: proxy=${HTTPS_PROXY:-none}"
pip download -q --no-deps --no-cache-dir -d /tmp/dl six==1.16.0 >/tmp/pip.log 2>&1 && echo "net: pip-download ok" || { echo "net: pip-download failed"; tail -3 /tmp/pip.log; }
apt-get update >/tmp/apt.log 2>&1 && echo "net: apt-update ok" || { echo "net: apt-update failed"; tail -3 /tmp/apt.log; }
python3 - <<'PY'
import os, socket, urllib.request
def attempt(name, f):
    try:
        f()
        print(f"net: {name} reached")
    except Exception as exc:
        print(f"net: {name} failed: {type(exc).__name__}: {exc}")
attempt("https-via-proxy", lambda: urllib.request.urlopen("https://example.com/", timeout=10))
attempt("http-via-proxy", lambda: urllib.request.urlopen("http://example.com/", timeout=10))
attempt("direct-registry-ip", lambda: socket.create_connection((os.environ["REGISTRY_IP"], 443), timeout=5))
attempt("direct-1.1.1.1", lambda: socket.create_connection(("1.1.1.1", 443), timeout=5))
attempt("direct-dns", lambda: socket.getaddrinfo("pypi.org", 443))
PY
mkdir -p "$(dirname "$1")" && printf '{"python_path": "/usr/bin/python3", "python_version": null, "torch_version": null, "cuda_available": null, "gpu_count": null, "ddp_expected_ok": null, "env_tool": "system", "env_name": null, "notes": null}' > "$1"
"""


class NetworkProbeAgent(Agent):
    """Downloads from PyPI and Debian, then tries a non-allowed host through the proxy and
    every way around it (an allowed registry's own address, 1.1.1.1, outside DNS). The spec's
    `env` gives REGISTRY_IP: the registry's address as the node resolves it."""

    trusted = True

    def run(self, sandbox, ctx: AgentContext) -> AgentRun:
        started = time.monotonic()
        env = {**(self.spec.env if self.spec is not None else {}), **ctx.env}
        result = sandbox.exec(["sh", "-c", _SCRIPT, "agent", ctx.report_path], timeout=ctx.timeout_s, env=env)
        return AgentRun.from_exec(result, ctx.timeout_s, started)


# The node as the sandbox sees it: its gateway (the proxy's host, else the default route's) and
# the port of a host service (HOST_PORT, listening on all addresses), also at the node's outside
# address when NODE_IP is given; then a download (through the egress proxy when there is one).
_HOST_SCRIPT = r"""
python3 - <<'PY'
import os, socket, struct, time, urllib.parse
def default_gateway():
    for line in open("/proc/net/route").read().splitlines()[1:]:
        fields = line.split()
        if fields[1] == "00000000":
            return socket.inet_ntoa(struct.pack("<L", int(fields[2], 16)))
proxy = os.environ.get("HTTPS_PROXY")
gateway = urllib.parse.urlsplit(proxy).hostname if proxy else default_gateway()
targets = [("host-service", gateway)] + ([("host-service-node-ip", os.environ["NODE_IP"])] if os.environ.get("NODE_IP") else [])
for name, host in targets:
    started = time.monotonic()
    try:
        socket.create_connection((host, int(os.environ["HOST_PORT"])), timeout=10)
        print(f"net: {name} reached")
    except OSError as exc:
        print(f"net: {name} failed: {type(exc).__name__} after {time.monotonic() - started:.2f} s")
PY
pip download -q --no-deps --no-cache-dir -d /tmp/dl six==1.16.0 >/tmp/pip.log 2>&1 && echo "net: pip-download ok" || { echo "net: pip-download failed"; tail -3 /tmp/pip.log; }
mkdir -p "$(dirname "$1")" && printf '{"python_path": "/usr/bin/python3", "python_version": null, "torch_version": null, "cuda_available": null, "gpu_count": null, "ddp_expected_ok": null, "env_tool": "system", "env_name": null, "notes": null}' > "$1"
"""


class HostServiceProbeAgent(Agent):
    """Tries a service of its node (the spec's env HOST_PORT, at the gateway its proxy
    variables name or its default route's, and at NODE_IP when given), then downloads from
    PyPI (through its egress proxy under `registries`)."""

    trusted = True

    def run(self, sandbox, ctx: AgentContext) -> AgentRun:
        started = time.monotonic()
        env = {**(self.spec.env if self.spec is not None else {}), **ctx.env}
        result = sandbox.exec(["sh", "-c", _HOST_SCRIPT, "agent", ctx.report_path], timeout=ctx.timeout_s, env=env)
        return AgentRun.from_exec(result, ctx.timeout_s, started)


class WaitThenProbeHostAgent(HostServiceProbeAgent):
    """HostServiceProbeAgent that first touches the host file STARTED_FLAG (its sandbox runs),
    then waits up to 120 s for the host file GO_FLAG (the test has tampered with the node's
    firewall meanwhile) before it tries the node's service."""

    def run(self, sandbox, ctx: AgentContext) -> AgentRun:
        import os

        env = self.spec.env if self.spec is not None else {}
        open(env["STARTED_FLAG"], "w").close()
        deadline = time.monotonic() + 120
        while not os.path.exists(env["GO_FLAG"]) and time.monotonic() < deadline:
            time.sleep(0.1)
        return super().run(sandbox, ctx)
