"""The host guard on the real node (issue 11 item 4): real iptables, real Docker, real sockets.

A TCP service of the node listening on all addresses stands in for Ray's GCS (0.0.0.0:6379):
a sandbox of either policy (`registries` on reb-ray-registries, `open` on reb-ray-open) is
refused by it at once, at the gateway and at the node's other address, while the proxies it may
use still serve it (and an `open` one still reaches PyPI directly)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import pytest

from reb_ray.llm.proxy import ProxyServer
from reb_ray.models.sweep import SweepConfig, TrialSpec
from reb_ray.suite.load import load_suite
from reb_ray.netpolicy import hostguard
from reb_ray.netpolicy.hostguard import CHAIN, IP6TABLES, ensure_guard, rejected_packets, remove_guard
from reb_ray.netpolicy.network import BRIDGE_NAME, NETWORK_NAME, OPEN, ensure_network
from reb_ray.netpolicy.ports import sandbox_ports
from reb_ray.trial.egress import TrialEgress, proxy_ports
from reb_ray.sandbox import SandboxConfig
from reb_ray.sandbox.docker.docker_sandbox import DockerSandbox
from tests.netpolicy.own_names import own_network, removed_after

pytestmark = pytest.mark.docker

JUMP = f"-A INPUT -i {BRIDGE_NAME} -j {CHAIN}"
OPEN_JUMP = f"-A INPUT -i {OPEN.bridge} -j {OPEN.chain}"


def _guard_lines(binary: str = "iptables", chain: str = CHAIN) -> list[str]:
    """Every line of the filter table that names the guard's chain."""
    out = subprocess.run([binary, "-S"], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if chain in line]


def _other_lines(binary: str = "iptables", chains: tuple[str, ...] = (CHAIN,)) -> list[str]:
    out = subprocess.run([binary, "-S"], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if not any(chain in line for chain in chains)]


def _expected(gateway: str) -> list[str]:
    return [f"-N {CHAIN}", JUMP, *hostguard.chain_rules(gateway, sandbox_ports())]


def _expected_open(gateway: str) -> list[str]:
    return [f"-N {OPEN.chain}", OPEN_JUMP, *hostguard.chain_rules(gateway, sandbox_ports(), OPEN.chain)]


@pytest.fixture(scope="module", autouse=True)
def _leave_the_host_as_found():
    """A node keeps its guards; a test machine gets back the rules it had, unless a sandbox of
    another sweep on this daemon joined the network meanwhile (its guard stays: removing it
    would open that sandbox to the node until its watch put it back)."""
    had, had_open = bool(_guard_lines()), bool(_guard_lines(chain=OPEN.chain))
    yield
    if not had and not _in_use(NETWORK_NAME):
        remove_guard(BRIDGE_NAME)
    if not had_open and not _in_use(OPEN.name):
        remove_guard(OPEN.bridge, OPEN.chain)


def _in_use(network: str) -> bool:
    """Whether a container is attached to Docker network `network` (a missing one: no)."""
    from reb_ray.sandbox.docker.docker_client import connect

    try:
        return bool(connect().networks.get(network).attrs.get("Containers"))
    except Exception:  # noqa: BLE001  (no such network)
        return False


@pytest.fixture
def host_service():
    """A node service on all addresses, outside the proxies' range: (port, peers it accepted)."""
    server = socket.create_server(("0.0.0.0", 0))
    server.settimeout(0.2)
    port, accepted, stop = server.getsockname()[1], [], threading.Event()
    assert port not in sandbox_ports()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, peer = server.accept()
            except TimeoutError:
                continue
            accepted.append(peer)
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield port, accepted
    stop.set()
    thread.join()
    server.close()


def _node_address() -> str:
    """The node's own address on its outside interface (not the bridge's)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.1", 9))  # TEST-NET-1: nothing is sent, the route picks the source
        return probe.getsockname()[0]


_CONNECT = ("python3 -c \"import socket, sys, time\nfor host in sys.argv[2:]:\n t = time.monotonic()\n try:\n"
            "  socket.create_connection((host, int(sys.argv[1])), timeout=10); print(host, 'reached')\n"
            " except OSError as e: print(host, type(e).__name__, round(time.monotonic() - t, 2))\" ")


def test_a_registries_sandbox_is_refused_by_host_services_and_reaches_its_proxies(sandbox_image, host_service):
    port, accepted = host_service
    node_ip = _node_address()
    egress, llm, box = TrialEgress(SweepConfig(network_policy="registries")), None, None
    try:
        config = egress.open(SandboxConfig(image=sandbox_image, sweep_id="hostguard", trial_id="guard",
                                                ca_bundle=SweepConfig().sandbox.ca_bundle))  # the node's CA bundle, as trials get it
        gateway = egress.gateway
        llm = ProxyServer(host=gateway, ports=proxy_ports(NETWORK_NAME)).start()  # as the node's LLM proxy binds
        box = DockerSandbox(config)
        egress.attach(box)
        before = rejected_packets()

        tried = box.exec(_CONNECT + f"{port} {gateway} {node_ip}").output.split("\n")
        results = {line.split()[0]: line.split()[1:] for line in tried if line.strip()}
        for host in (gateway, node_ip):  # refused at once (a TCP reset), not a 10 s timeout
            assert results[host][0] == "ConnectionRefusedError" and float(results[host][1]) < 1.0, tried
        assert accepted == []
        assert rejected_packets() >= before + 2

        # The proxies it may use are inside the range the guard opens, and serve it.
        assert egress.proxy.port in sandbox_ports() and urlsplit(llm.url).port in sandbox_ports()
        answer = box.exec(f"python3 -c \"import urllib.request as u\ntry: u.urlopen('{llm.url}/v1/messages', "
                          f"data=b'{{}}', timeout=10)\nexcept Exception as e: print(e)\"").output
        assert "HTTP Error 401" in answer and llm.unknown_key_requests == 1  # reached; it knows no such key
        pip = box.exec("pip download -q --no-deps --no-cache-dir -d /tmp/dl six==1.16.0 && echo PIP-OK")
        assert "PIP-OK" in pip.output, pip.output
        assert egress.proxy.allowed >= 1
    finally:
        if box is not None:
            box.close()
        egress.close(None)
        if llm is not None:
            llm.stop()


def test_an_open_sandbox_is_refused_by_host_services_and_reaches_pypi_and_its_llm_proxy(sandbox_image, host_service):
    port, accepted = host_service
    node_ip = _node_address()
    config = SweepConfig()  # the default: policy open, no explicit network
    egress, llm, box = TrialEgress(config), None, None
    try:
        sandbox_config = egress.open(SandboxConfig(image=sandbox_image, sweep_id="hostguard", trial_id="open",
                                                   ca_bundle=config.sandbox.ca_bundle))  # the node's CA bundle, as trials get it
        assert sandbox_config.network == OPEN.name and egress.proxy is None  # no egress proxy: the internet is open
        gateway = egress.gateway
        llm = ProxyServer(host=gateway, ports=proxy_ports(OPEN.name)).start()  # as the node's LLM proxy binds
        box = DockerSandbox(sandbox_config)
        before = rejected_packets(chain=OPEN.chain)

        tried = box.exec(_CONNECT + f"{port} {gateway} {node_ip}").output.split("\n")
        results = {line.split()[0]: line.split()[1:] for line in tried if line.strip()}
        for host in (gateway, node_ip):  # refused at once (a TCP reset), not a 10 s timeout
            assert results[host][0] == "ConnectionRefusedError" and float(results[host][1]) < 1.0, tried
        assert accepted == []
        assert rejected_packets(chain=OPEN.chain) >= before + 2

        assert urlsplit(llm.url).port in sandbox_ports()  # the LLM proxy, inside the range the guard opens
        answer = box.exec(f"python3 -c \"import urllib.request as u\ntry: u.urlopen('{llm.url}/v1/messages', "
                          f"data=b'{{}}', timeout=10)\nexcept Exception as e: print(e)\"").output
        assert "HTTP Error 401" in answer and llm.unknown_key_requests == 1  # reached; it knows no such key
        # PyPI directly (no proxy variable), over TLS with the node's CA bundle mounted.
        assert "HTTPS_PROXY" not in sandbox_config.env and sandbox_config.ca_bundle is not None
        pip = box.exec("pip download -q --no-deps --no-cache-dir -d /tmp/dl six==1.16.0 && echo PIP-OK")
        assert "PIP-OK" in pip.output, pip.output
        assert egress.close(None) == {"sandbox_network": OPEN.name, "network_host_guard": True}
    finally:
        if box is not None:
            box.close()
        egress.close(None)
        if llm is not None:
            llm.stop()


def _trial(tmp_path, image: str, port: int, **config) -> dict:
    from reb_ray.trial.run import run_trial

    spec = {"kind": "tests.netpolicy.agents:HostServiceProbeAgent",
            "env": {"HOST_PORT": str(port), "NODE_IP": _node_address()}}
    cfg = SweepConfig(output=tmp_path / "runs", wheelhouses=[], pip_cache=False, agents=["host"],
                      agent_specs={"host": spec}, **({"network_policy": "registries"} | config))
    task = next(t for t in load_suite("demo") if t.id == "numpy-trainer")
    return run_trial(TrialSpec(sweep_id=f"hostguard-{uuid.uuid4().hex[:6]}", agent="host", task=task, trial_index=0,
                               config=cfg, image=image)).trial


def test_the_guard_holds_for_every_trial_and_is_never_doubled(sandbox_image, host_service, tmp_path, docker_client):
    """A trial on a node whose guard an earlier trial installed (installed here first, as a
    trial's start does): the trial is refused by the node's service, and its own start leaves
    exactly one chain and one jump. (A first install is the sandbox tests' above; many starts at
    once, `test_concurrent_installs...`.)"""
    from reb_ray.netpolicy.network import REGISTRIES

    port, accepted = host_service
    gateway = ensure_network(docker_client, REGISTRIES)
    ensure_guard(BRIDGE_NAME, gateway, sandbox_ports())  # what the previous trial's start left
    assert _guard_lines() == _expected(gateway)
    others = _other_lines()
    row = _trial(tmp_path, sandbox_image, port)
    assert row["status"] == "scored" and row["report_status"] == "ok", row["failure_reason"]
    out = row["agent_output_tail"]
    assert "net: host-service failed: ConnectionRefusedError" in out and "net: pip-download ok" in out, out
    assert "net: host-service-node-ip failed: ConnectionRefusedError" in out, out
    assert (row["sandbox_network"], row["network_host_guard"]) == (NETWORK_NAME, True)
    assert docker_client.networks.get(NETWORK_NAME).attrs["IPAM"]["Config"][0]["Gateway"] == gateway
    assert _guard_lines() == _expected(gateway)  # one chain, one jump, after the trial
    if hostguard._kernel_has_ipv6():
        assert _guard_lines("ip6tables") == [f"-N {CHAIN}", JUMP, *hostguard.chain_rules6()]
    assert accepted == []
    assert _other_lines() == others  # nothing else in the filter table changed
    assert docker_client.containers.list(all=True, filters={"label": f"reb-ray.sweep={row['sweep_id']}"}) == []


def test_the_open_guard_holds_for_every_trial_and_leaves_docker0_alone(sandbox_image, host_service, tmp_path,
                                                                         docker_client):
    """As above under `open`, on a node whose open guard an earlier trial installed."""
    port, accepted = host_service
    gateway = ensure_network(docker_client, OPEN)  # Docker's own rules for the network exist before the snapshot
    ensure_guard(OPEN.bridge, gateway, sandbox_ports(), OPEN.chain)  # what the previous trial's start left
    assert _guard_lines(chain=OPEN.chain) == _expected_open(gateway)
    others = _other_lines(chains=(OPEN.chain,))
    row = _trial(tmp_path, sandbox_image, port, network_policy="open")
    assert row["status"] == "scored" and row["report_status"] == "ok", row["failure_reason"]
    out = row["agent_output_tail"]
    for name in ("host-service", "host-service-node-ip"):
        assert f"net: {name} failed: ConnectionRefusedError" in out, out
    assert "net: pip-download ok" in out, out  # directly from PyPI: no egress proxy under `open`
    assert (row["network_policy"], row["sandbox_network"], row["network_host_guard"]) == ("open", OPEN.name, True)
    assert row.get("network_denied_count") is None
    assert docker_client.networks.get(OPEN.name).attrs["IPAM"]["Config"][0]["Gateway"] == gateway
    assert _guard_lines(chain=OPEN.chain) == _expected_open(gateway)  # one chain, one jump
    if hostguard._kernel_has_ipv6():
        assert _guard_lines("ip6tables", OPEN.chain) == [f"-N {OPEN.chain}", OPEN_JUMP,
                                                         *hostguard.chain_rules6(OPEN.chain)]
    assert accepted == []
    assert _other_lines(chains=(OPEN.chain,)) == others  # nothing else changed: no rule names docker0 anew
    assert not any("docker0" in line for line in _guard_lines(chain=OPEN.chain))


def test_an_explicit_network_runs_unguarded_and_the_row_says_so(sandbox_image, host_service, tmp_path):
    from reb_ray.trial.egress import unguarded_warning

    port, _accepted = host_service
    row = _trial(tmp_path, sandbox_image, port, network_policy="open", network="bridge")
    assert row["status"] == "scored" and "net: pip-download ok" in row["agent_output_tail"], row["failure_reason"]
    assert (row["sandbox_network"], row["network_host_guard"]) == ("bridge", False)
    assert "without the host guard" in unguarded_warning(SweepConfig(network="bridge"))
    assert unguarded_warning(SweepConfig()) is None and unguarded_warning(SweepConfig(sandbox="local")) is None


def _own_lines(net, binary: str = "iptables") -> list[str]:
    return _guard_lines(binary, net.chain)


def _own_expected(net, gateway: str) -> list[str]:
    return [f"-N {net.chain}", f"-A INPUT -i {net.bridge} -j {net.chain}",
            *hostguard.chain_rules(gateway, sandbox_ports(), net.chain)]


def test_the_two_guards_are_independent():
    """Two guards of their own (never reb-ray's: a sweep on this node keeps its chains)."""
    ports, reg, opn = sandbox_ports(), own_network(), own_network("open")
    with removed_after(None, reg, opn):
        ensure_guard(reg.bridge, "172.31.255.1", ports, reg.chain)
        ensure_guard(opn.bridge, "172.31.254.1", ports, opn.chain)
        registries = _own_lines(reg)
        assert registries == _own_expected(reg, "172.31.255.1")
        remove_guard(opn.bridge, opn.chain)
        assert _own_lines(opn) == [] and _own_lines(reg) == registries
        ensure_guard(opn.bridge, "172.31.254.1", ports, opn.chain)
        remove_guard(reg.bridge, reg.chain)
        assert _own_lines(reg) == [] and _own_lines(opn) == _own_expected(opn, "172.31.254.1")


def test_concurrent_installs_and_a_tampered_chain_end_in_exactly_the_guard():
    gateway, ports, net = "172.31.255.1", sandbox_ports(), own_network()
    with removed_after(None, net):
        assert _own_lines(net) == []
        others = _other_lines(chains=(net.chain,))
        with ThreadPoolExecutor(8) as pool:  # eight trial starts on one node at once
            list(pool.map(lambda _: ensure_guard(net.bridge, gateway, ports, net.chain), range(8)))
        assert _own_lines(net) == _own_expected(net, gateway)
        # Someone appends an ACCEPT to the chain and doubles the jump: the next start repairs both.
        subprocess.run(["iptables", "-A", net.chain, "-j", "ACCEPT"], check=True)
        subprocess.run(["iptables", "-A", "INPUT", "-i", net.bridge, "-j", net.chain], check=True)
        ensure_guard(net.bridge, gateway, ports, net.chain)
        assert _own_lines(net) == _own_expected(net, gateway)
        assert _other_lines(chains=(net.chain,)) == others
        if hostguard._kernel_has_ipv6():
            assert rejected_packets(IP6TABLES, net.chain) is not None


def test_without_iptables_a_registries_trial_is_an_infra_failure(sandbox_image, tmp_path, monkeypatch, docker_client):
    monkeypatch.setattr(hostguard, "IPTABLES", str(tmp_path / "no-iptables"))  # a node without it
    row = _trial(tmp_path, sandbox_image, 9)
    assert (row["status"], row["failure_owner"], row["failure_category"]) == ("infra_error", "infra", "infra_network_guard")
    assert "no-iptables not found" in row["failure_reason"] and "\n" not in row["failure_reason"]
    assert docker_client.containers.list(all=True, filters={"label": f"reb-ray.sweep={row['sweep_id']}"}) == []


def test_without_iptables_an_open_trial_is_an_infra_failure_naming_the_way_out(sandbox_image, tmp_path, monkeypatch,
                                                                                 docker_client):
    monkeypatch.setattr(hostguard, "IPTABLES", str(tmp_path / "no-iptables"))  # a node without it (or not root)
    row = _trial(tmp_path, sandbox_image, 9, network_policy="open")
    assert (row["status"], row["failure_owner"], row["failure_category"]) == ("infra_error", "infra", "infra_network_guard")
    reason = row["failure_reason"]
    assert "no-iptables not found" in reason and 'network = "bridge"' in reason and "\n" not in reason
    assert row["network_host_guard"] is None and row["sandbox_network"] is None  # no sandbox ever started
    assert docker_client.containers.list(all=True, filters={"label": f"reb-ray.sweep={row['sweep_id']}"}) == []


def test_as_a_user_without_root_the_guard_refuses_with_one_line():
    script = ("from reb_ray.errors import InfraError\nfrom reb_ray.netpolicy.hostguard import ensure_guard\n"
              "try:\n    ensure_guard('rebray-test9', '172.31.255.1', range(29000, 29001))\n"
              "except InfraError as exc:\n    print(exc.category, exc)\n    raise SystemExit(3)\n")
    done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", script],
                          capture_output=True, text=True, env={**os.environ, "TMPDIR": "/tmp"}, cwd=os.getcwd(),
                          timeout=60)
    assert done.returncode == 3, done.stderr
    [line] = done.stdout.splitlines()
    assert line.startswith("infra_network_guard iptables") and "root" in line
