"""The egress proxy over real sockets: a real aiohttp server as the registry, real HTTP clients
(http.client, as pip and apt speak to a proxy: absolute-form requests and CONNECT tunnels)."""

from __future__ import annotations

import gzip
import http.client
import json
import socket

import pytest
from aiohttp import web

from reb_ray.background import BackgroundServer
from reb_ray.netpolicy.allowlist import HostPolicy
from reb_ray.netpolicy.proxy import EgressProxy


def _registry_app() -> web.Application:
    async def hello(request: web.Request) -> web.Response:
        return web.Response(text=f"hi from {request.host}")

    async def echo(request: web.Request) -> web.Response:
        return web.Response(body=await request.read(), headers={"X-Seen-Proxy-Auth": str("Proxy-Authorization" in request.headers)})

    app = web.Application()
    app.router.add_get("/hello", hello)
    app.router.add_post("/echo", echo)
    return app


@pytest.fixture
def registry():
    with BackgroundServer(_registry_app, "127.0.0.1", 0, name="test-registry") as server:
        yield server


@pytest.fixture
def proxy(registry):
    policy = HostPolicy(["pypi.org", f"localhost:{registry.port}"])
    policy.add_exact("127.0.0.1", registry.port)  # as the trial adds its LLM proxy
    with EgressProxy(policy, "127.0.0.1", connect_timeout_s=5) as egress:
        yield egress


def _via(proxy: EgressProxy) -> http.client.HTTPConnection:
    return http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)


def test_plain_http_is_relayed_with_keep_alive_and_bodies(proxy, registry):
    conn = _via(proxy)
    base = f"http://127.0.0.1:{registry.port}"
    conn.request("GET", f"{base}/hello")
    first = conn.getresponse()
    assert (first.status, first.read()) == (200, f"hi from 127.0.0.1:{registry.port}".encode())
    conn.request("POST", f"{base}/echo", body=b"x" * 100_000, headers={"Proxy-Authorization": "Basic eA=="})
    second = conn.getresponse()  # the same connection: kept alive
    assert (second.status, second.read()) == (200, b"x" * 100_000)
    assert second.getheader("X-Seen-Proxy-Auth") == "False"  # hop-by-hop headers are not forwarded
    conn.request("POST", f"{base}/echo", body=iter([b"chunk-1 ", b"chunk-2"]), encode_chunked=True)
    third = conn.getresponse()
    assert third.read() == b"chunk-1 chunk-2"
    conn.close()
    assert (proxy.allowed, proxy.denied) == (3, 0)
    assert [r["method"] for r in proxy.records()] == ["GET", "POST", "POST"]


def test_connect_opens_a_tunnel_to_an_allowed_host(proxy, registry):
    conn = _via(proxy)
    conn.set_tunnel("127.0.0.1", registry.port)
    conn.request("GET", "/hello")
    answer = conn.getresponse()
    assert (answer.status, answer.read()) == (200, f"hi from 127.0.0.1:{registry.port}".encode())
    [record] = proxy.records()
    assert (record["method"], record["host"], record["port"], record["decision"]) == ("CONNECT", "127.0.0.1",
                                                                                    registry.port, "allowed")


def test_refused_requests_are_answered_403_recorded_and_counted(proxy, registry):
    conn = _via(proxy)
    conn.request("GET", "http://example.com/")
    plain = conn.getresponse()
    assert plain.status == 403 and b"example.com:80 is not on the allow-list" in plain.read()
    tunnel = _via(proxy)
    tunnel.set_tunnel("example.com", 443)
    with pytest.raises(OSError, match="403"):
        tunnel.request("GET", "/")
    # An allowed name that resolves to the node's loopback is refused too.
    local = _via(proxy)
    local.request("GET", f"http://localhost:{registry.port}/hello")
    assert local.getresponse().status == 403
    assert (proxy.denied, proxy.allowed) == (3, 0)
    records = proxy.records()
    assert [(r["method"], r["host"], r["port"], r["decision"]) for r in records] == [
        ("GET", "example.com", 80, "denied"), ("CONNECT", "example.com", 443, "denied"),
        ("GET", "localhost", registry.port, "denied")]
    assert records[2]["reason"].startswith("localhost resolves to a local address")
    assert all(r["time"].endswith("+00:00") and r["client"] == "127.0.0.1" for r in records)


def test_a_request_that_is_not_for_a_proxy_is_refused(proxy):
    conn = _via(proxy)
    conn.request("GET", "/")  # origin-form: someone took the proxy for a server
    assert conn.getresponse().status == 400
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as raw:
        raw.sendall(b"\x16\x03\x01 not http at all\r\n\r\n")
        assert raw.recv(100).startswith(b"HTTP/1.1 400")
    assert proxy.denied == 2 and proxy.records()[0]["reason"].startswith("not a proxy request")


def test_only_the_trials_own_sandbox_is_served(proxy, registry):
    proxy.serve_only("10.255.0.9")  # another address than ours
    conn = _via(proxy)
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        conn.request("GET", f"http://127.0.0.1:{registry.port}/hello")
        conn.getresponse()
    assert (proxy.foreign, proxy.denied, proxy.allowed) == (1, 0, 0)
    assert proxy.records()[0]["decision"] == "foreign"


def test_records_are_bounded_but_counts_go_on(registry):
    with EgressProxy(HostPolicy([]), "127.0.0.1", records_kept=2) as egress:
        for _ in range(4):
            conn = http.client.HTTPConnection("127.0.0.1", egress.port, timeout=10)
            conn.request("GET", "http://example.org/")
            assert conn.getresponse().status == 403
            conn.close()
        assert (egress.denied, len(egress.records()), egress.dropped_records) == (4, 2, 2)


def test_the_host_header_is_the_checked_urls(proxy, registry):
    """A plain request for an allowed URL cannot name another host to the server (a CDN routes
    by Host: domain fronting); the proxy sends the URL's own."""
    conn = _via(proxy)
    conn.request("GET", f"http://127.0.0.1:{registry.port}/hello", headers={"Host": "evil.example.com"})
    assert conn.getresponse().read() == f"hi from 127.0.0.1:{registry.port}".encode()
