"""A real Docker sandbox on the bridge network reaches the proxy with its stand-in key only."""

from __future__ import annotations

import ipaddress
import json

import pytest

from reb_ray.llm.proxy import ProxyServer
from reb_ray.sandbox import SandboxConfig, open_sandbox
from tests.llm.clients import request_body
from reb_ray.testing.llm_session import REAL_KEY, REAL_KEY_ENV

pytestmark = pytest.mark.docker

CLIENT = """
import json, os, sys, urllib.request
request = urllib.request.Request(os.environ["BASE"] + "/v1/chat/completions", data=sys.argv[1].encode(),
                                 headers={"Authorization": "Bearer " + os.environ["KEY"],
                                          "Content-Type": "application/json"})
with urllib.request.urlopen(request, timeout=30) as response:
    print(json.dumps({"status": response.status, "body": json.loads(response.read())}))
"""


def bridge_gateway(docker_client) -> str:
    """The host's address on Docker's default bridge (where sandboxes find node services)."""
    config = docker_client.networks.get("bridge").attrs["IPAM"]["Config"][0]
    return config.get("Gateway") or str(next(ipaddress.ip_network(config["Subnet"]).hosts()))


def test_a_sandbox_reaches_the_proxy_on_the_bridge(docker_client, sandbox_image, endpoint, real_key, request):
    with ProxyServer(host=bridge_gateway(docker_client)) as proxy:
        key = proxy.register_trial("t1", endpoint.url, REAL_KEY_ENV)
        config = SandboxConfig(image=sandbox_image, sweep_id="test", trial_id=request.node.name[:60],
                               env={"BASE": proxy.url, "KEY": key})
        with open_sandbox("docker", config, trusted=True) as sandbox:
            result = sandbox.exec(["python3", "-c", CLIENT, json.dumps(request_body("openai_chat", False))], timeout=60)
            env = sandbox.exec(["env"], timeout=30)
        meter = proxy.meter("t1")
    assert result.exit_code == 0, result.output
    answer = json.loads(result.output)
    assert answer["status"] == 200
    assert answer["body"]["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "bash"
    assert meter["requests"] == 1 and meter["input_tokens"] == 1200
    assert key in env.output and REAL_KEY not in env.output + result.output
