"""The node's proxy port range: parsing its setting, and binding inside it over real sockets."""

from __future__ import annotations

import socket

import pytest

from reb_ray.errors import RebRayError
from reb_ray.llm.proxy import ProxyServer
from reb_ray.netpolicy.allowlist import HostPolicy
from reb_ray.netpolicy.ports import DEFAULT_PORTS, PORTS_ENV, bind_in, sandbox_ports
from reb_ray.netpolicy.proxy import EgressProxy


def test_the_range_is_the_default_or_the_node_setting(monkeypatch):
    monkeypatch.delenv(PORTS_ENV, raising=False)
    assert sandbox_ports() == DEFAULT_PORTS == range(29000, 30000)
    monkeypatch.setenv(PORTS_ENV, "41000-41009")
    assert sandbox_ports() == range(41000, 41010)
    monkeypatch.setenv(PORTS_ENV, "41000-41000")
    assert sandbox_ports() == range(41000, 41001)


@pytest.mark.parametrize("value", ["41000", "41009-41000", "80-90", "41000-70000", "a-b", "41000:41009"])
def test_a_malformed_range_is_one_line_naming_the_setting(monkeypatch, value):
    monkeypatch.setenv(PORTS_ENV, value)
    with pytest.raises(RebRayError, match=rf"^{PORTS_ENV}='{value}': expected LO-HI") as err:
        sandbox_ports()
    assert "\n" not in str(err.value)


def _free_block(size: int) -> range:
    """`size` consecutive ports free on loopback now (found by binding them)."""
    for start in range(29500, 29900, size):
        socks = []
        try:
            for port in range(start, start + size):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
            return range(start, start + size)
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise AssertionError("no free block of ports")


def test_binding_skips_ports_in_use_and_says_when_the_range_is_full():
    ports = _free_block(3)
    held = [bind_in("127.0.0.1", ports) for _ in ports]  # each takes another port of the range
    try:
        assert sorted(s.getsockname()[1] for s in held) == list(ports)
        with pytest.raises(RebRayError, match=rf"no free port on 127.0.0.1 in {ports.start}-{ports.stop - 1}"):
            bind_in("127.0.0.1", ports)
    finally:
        for s in held:
            s.close()


def test_both_proxies_listen_inside_the_range_and_serve():
    ports = _free_block(4)
    with EgressProxy(HostPolicy([]), "127.0.0.1", ports=ports) as egress, \
            ProxyServer("127.0.0.1", ports=ports) as llm:
        assert egress.port in ports and llm._server.port in ports and egress.port != llm._server.port
        for port in (egress.port, llm._server.port):
            with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:  # really listening
                conn.sendall(b"GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n")
                assert conn.recv(12).startswith(b"HTTP/1.1 40")  # 403 off the allow-list / 401 unknown key
