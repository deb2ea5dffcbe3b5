"""The allow-list of `registries` sandboxes and the sweep options that set it (pure)."""

from __future__ import annotations

import pytest

from reb_ray.errors import RebRayError
from reb_ray.models.sweep import SweepConfig
from reb_ray.netpolicy.allowlist import DEFAULT_ALLOW, HostPolicy, parse_pattern


def test_names_wildcards_ports_and_addresses():
    policy = HostPolicy(["pypi.org", "*.anaconda.org", "mirror.example.net:8080", "10.1.2.3"])
    allowed = [("pypi.org", 443), ("PyPI.org.", 80), ("conda.anaconda.org", 443), ("a.b.anaconda.org", 443),
               ("mirror.example.net", 8080), ("10.1.2.3", 443)]
    refused = [("pypi.org", 22), ("evil-pypi.org", 443), ("pypi.org.evil.com", 443), ("anaconda.org", 443),
               ("mirror.example.net", 443), ("10.1.2.4", 443), ("example.com", 443)]
    assert [policy.decide(h, p) for h, p in allowed] == [None] * len(allowed)
    for host, port in refused:
        assert policy.decide(host, port) == f"{host.lower()}:{port} is not on the allow-list"
    policy.add_exact("172.18.0.1", 41234)  # the node's LLM proxy, added at run time
    assert policy.decide("172.18.0.1", 41234) is None and policy.decide("172.18.0.1", 41235) is not None
    assert policy.is_exact("172.18.0.1", 41234) and not policy.is_exact("pypi.org", 443)


@pytest.mark.parametrize("bad", ["https://pypi.org", "pypi.org/simple", "*", "*.", "pypi.org:0", "pypi.org:99999",
                                 "pypi.org:http", "", "a..b", "-x.org", "foo_bar.org"])
def test_a_bad_pattern_is_refused_by_name(bad):
    with pytest.raises(ValueError, match="host pattern"):
        parse_pattern(bad)


def test_the_default_allow_list_is_the_registries():
    assert {"pypi.org", "files.pythonhosted.org", "deb.debian.org", "registry.npmjs.org",
            "download.pytorch.org"} <= set(DEFAULT_ALLOW)
    assert not any("huggingface" in p or "github" in p for p in DEFAULT_ALLOW)
    assert SweepConfig().network.allow == list(DEFAULT_ALLOW) and SweepConfig().network.policy == "open"


def test_config_errors_are_one_line_naming_the_field(tmp_path):
    from reb_ray.cli.sweep import load_config

    toml = tmp_path / "sweep.toml"
    toml.write_text('network_policy = "registries"\nnetwork_allow = ["pypi.org", "https://github.com"]\n')
    with pytest.raises(RebRayError) as err:
        load_config(toml, {})
    message = str(err.value)
    assert message.startswith(f"{toml}: network_allow = [") and "\n" not in message
    assert "host pattern 'https://github.com': expected a host name, `*.domain` or an IPv4 address" in message
    with pytest.raises(RebRayError, match="flags: --network-policy = 'closed'"):
        load_config(None, {"network_policy": "closed"})
    with pytest.raises(RebRayError, match="flags: --network-policy = 'registries': the local sandbox shares the node's network, which no proxy "
                       "can restrict: `registries` needs the docker sandbox$"):
        load_config(None, {"network_policy": "registries", "sandbox": "local"})
    with pytest.raises(RebRayError, match="cannot be combined with network 'host'"):
        load_config(None, {"network_policy": "registries", "network": "host"})


def test_the_policy_is_part_of_the_sweep_id_only_when_not_open():
    base = SweepConfig()
    assert SweepConfig(network_policy="open").resolved_sweep_id() == base.resolved_sweep_id()
    registries = SweepConfig(network_policy="registries")
    assert registries.resolved_sweep_id() != base.resolved_sweep_id()
    assert SweepConfig(network_policy="registries", network_allow=["pypi.org"]).resolved_sweep_id() != \
        registries.resolved_sweep_id()
