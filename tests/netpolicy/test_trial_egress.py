"""Issue 11 item 4 end to end: `registries` trials on the real Docker daemon, through the real
egress proxy, to the real PyPI and Debian mirrors (reachable from this machine); every way
around the proxy fails, every refusal is in the row and the trial's network log."""

from __future__ import annotations

import gzip
import json
import socket
import uuid

import pytest

from reb_ray.models.sweep import SweepConfig, TrialSpec
from reb_ray.suite.load import load_suite
from reb_ray.netpolicy.network import NETWORK_NAME, OPEN
from reb_ray.trial.egress import (TrialEgress, guarded_network, harness_network, proxy_ports,
                                            sandbox_network)
from reb_ray.sandbox import SandboxConfig
from reb_ray.sandbox.docker.docker_sandbox import DockerSandbox

pytestmark = pytest.mark.docker

AGENT = "tests.netpolicy.agents:NetworkProbeAgent"


def _trial(tmp_path, image: str, **config) -> dict:
    from reb_ray.trial.run import run_trial

    spec = {"kind": AGENT, "env": {"REGISTRY_IP": socket.gethostbyname("pypi.org")}}
    cfg = SweepConfig(output=tmp_path / "runs", wheelhouses=[], pip_cache=False, agents=["net"],
                      agent_specs={"net": spec}, **config)
    task = next(t for t in load_suite("demo") if t.id == "numpy-trainer")
    return run_trial(TrialSpec(sweep_id=f"netpolicy-{uuid.uuid4().hex[:6]}", agent="net", task=task, trial_index=0,
                               config=cfg, image=image)).trial


def _lines(output: str) -> dict[str, str]:
    return {line.split()[1]: line for line in output.splitlines() if line.startswith("net: ")}


def test_a_registries_trial_reaches_pypi_and_debian_and_nothing_else(sandbox_image, tmp_path, docker_client):
    row = _trial(tmp_path, sandbox_image, network_policy="registries")
    assert row["status"] == "scored" and row["report_status"] == "ok", row["failure_reason"]
    net = _lines(row["agent_output_tail"])
    assert any(key.startswith("proxy=http://") for key in net)  # every tool's proxy variable is set
    assert net["pip-download"].endswith("ok") and net["apt-update"].endswith("ok"), row["agent_output_tail"]
    # Through the proxy, a host off the allow-list is refused (403), over TLS and plain HTTP.
    assert "failed" in net["https-via-proxy"] and "403" in net["https-via-proxy"]
    assert "HTTPError: HTTP Error 403" in net["http-via-proxy"]
    # Around the proxy there is no way out: not to an allowed registry's own address, not to
    # any address, and no outside name resolves.
    assert "failed" in net["direct-registry-ip"] and "failed" in net["direct-1.1.1.1"]
    assert "failed: gaierror" in net["direct-dns"]

    assert row["network_policy"] == "registries" and row["network_denied_count"] == 2
    log = [json.loads(line) for line in gzip.decompress((tmp_path / "runs" / row["network_log_path"]).read_bytes())
           .decode().splitlines()]
    summary, records = log[0], log[1:]
    assert summary["type"] == "summary" and summary["policy"] == "registries" and summary["denied"] == 2
    denied = [(r["method"], r["host"], r["port"]) for r in records if r["decision"] == "denied"]
    assert denied == [("CONNECT", "example.com", 443), ("GET", "example.com", 80)]
    assert all(r["time"] and r["reason"].endswith("is not on the allow-list") for r in records if r["decision"] == "denied")
    allowed = {(r["method"], r["host"]) for r in records if r["decision"] == "allowed"}
    assert ("CONNECT", "pypi.org") in allowed and ("CONNECT", "files.pythonhosted.org") in allowed
    assert ("GET", "deb.debian.org") in allowed
    assert docker_client.containers.list(all=True, filters={"label": f"reb-ray.sweep={row['sweep_id']}"}) == []


def test_the_default_is_open_and_recorded(sandbox_image, tmp_path):
    row = _trial(tmp_path, sandbox_image)
    net = _lines(row["agent_output_tail"])
    assert "proxy=none" in net and net["pip-download"].endswith("ok")
    assert (row["network_policy"], row.get("network_denied_count"), row.get("network_log_path")) == ("open", None, None)
    # On reb-ray's open network, behind the host guard; the internet is open (a registry's own
    # address directly, outside DNS).
    assert (row["sandbox_network"], row["network_host_guard"]) == (OPEN.name, True)
    assert net["direct-registry-ip"].endswith("reached") and net["direct-dns"].endswith("reached"), row["agent_output_tail"]


@pytest.mark.parametrize(("config", "network", "guarded"), [
    ({}, OPEN.name, True),  # the default
    ({"network": "bridge"}, "bridge", False),  # explicit: Docker's default bridge, as it is
    ({"network": "my-net"}, "my-net", False),
    ({"network_policy": "registries"}, NETWORK_NAME, True),
    ({"network_policy": "registries", "network": "bridge"}, NETWORK_NAME, True),
    ({"sandbox": "local"}, "bridge", False),
])
def test_which_network_a_sweeps_sandboxes_join(config, network, guarded):
    cfg = SweepConfig(**config)
    assert sandbox_network(cfg) == network and (guarded_network(cfg) is not None) == guarded
    assert (proxy_ports(network) is not None) == guarded  # the LLM proxy binds in the guard's range
    assert harness_network(cfg) == cfg.network.name or harness_network(cfg) == "bridge"  # helper containers: default bridge


#: A TCP connection from a sandbox: `reached`, or `failed` and why. A refusal between sandboxes is
#: a dropped packet, so its failure takes the whole timeout: 2 s, where a handshake on one
#: bridge takes microseconds and one to PyPI well under a second.
_PROBE = ("python3 -c \"import socket, sys\ntry:\n socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2); "
          "print('reached')\nexcept OSError as e: print('failed', e)\" ")
#: The same, retried for up to 20 s: the first sandbox's server is starting.
_UNTIL_REACHED = ("python3 -c \"import socket, sys, time\nend = time.monotonic() + 20\nwhile True:\n try:\n"
                  "  socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2); print('reached'); break\n"
                  " except OSError as e:\n  if time.monotonic() > end: print('failed', e); break\n  time.sleep(0.1)\" ")


def test_open_sandboxes_reach_the_internet_but_not_each_other(sandbox_image):
    egresses, boxes = [TrialEgress(SweepConfig()), TrialEgress(SweepConfig())], []
    try:
        for egress in egresses:
            boxes.append(DockerSandbox(egress.open(SandboxConfig(image=sandbox_image, sweep_id="netpolicy", trial_id="peer"))))
        first, second = boxes
        assert first.config.network == second.config.network == OPEN.name
        ip = first.client.api.inspect_container(first.id)["NetworkSettings"]["Networks"][OPEN.name]["IPAddress"]
        first.exec("nohup python3 -m http.server 8000 >/dev/null 2>&1 &")
        assert first.exec(_UNTIL_REACHED + f"{ip} 8000").output.strip() == "reached"  # the server runs
        assert second.exec(_PROBE + f"{ip} 8000").output.startswith("failed")  # enable_icc=false
        assert second.exec(_PROBE + "pypi.org 443").output.strip() == "reached"  # the internet is open
    finally:
        for box in boxes:
            box.close()


def test_sandboxes_on_the_internal_network_reach_neither_each_other_nor_each_others_proxy(sandbox_image):
    config = SweepConfig(network_policy="registries")
    egresses, boxes = [TrialEgress(config), TrialEgress(config)], []
    try:
        for egress in egresses:
            box = DockerSandbox(egress.open(SandboxConfig(image=sandbox_image, sweep_id="netpolicy", trial_id="peer")))
            boxes.append(box)
            egress.attach(box)
        first, second = boxes
        ip = egresses[0].proxy.client_ip
        assert first.config.network == NETWORK_NAME and ip != egresses[1].proxy.client_ip
        first.exec("nohup python3 -m http.server 8000 >/dev/null 2>&1 &")
        assert first.exec(_UNTIL_REACHED + f"{ip} 8000").output.strip() == "reached"  # the server runs
        assert second.exec(_PROBE + f"{ip} 8000").output.startswith("failed")  # no traffic between sandboxes
        # The second sandbox tries the first one's proxy: closed at once, recorded there as foreign.
        stolen = second.exec(f"python3 -c \"import urllib.request as u; "
                             f"o = u.build_opener(u.ProxyHandler({{'http': '{egresses[0].proxy.url}'}})); "
                             f"o.open('http://deb.debian.org/debian/', timeout=10)\"")
        assert not stolen.ok
        assert (egresses[0].proxy.foreign, egresses[0].proxy.allowed, egresses[0].proxy.denied) == (1, 0, 0)
    finally:
        for box in boxes:
            box.close()
        for egress in egresses:
            egress.close(None)
