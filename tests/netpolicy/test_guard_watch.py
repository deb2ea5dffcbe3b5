"""The host guard is put back while sandboxes run: real iptables, real Docker, real sockets.

A firewall reload that flushes the guard's chain and its jump from INPUT in the middle of an
agent phase is undone by the guard's watch within its interval, before the agent tries a
service of the node; and the next trial's sandbox is refused as well.

The trials run on an open network of the test's own (own_names.py) in place of `reb-ray-open`,
so the flushes never open the sandboxes of a sweep running on the same node."""

from __future__ import annotations

import subprocess
import threading
import time
import uuid

import pytest

from reb_ray.suite.load import load_suite
from reb_ray.models.sweep import SweepConfig, TrialSpec
from reb_ray.netpolicy import guard_watch
from reb_ray.netpolicy import network as network_module
from reb_ray.netpolicy.network import REGISTRIES
from reb_ray.trial import egress as egress_module
from tests.netpolicy.own_names import own_network, removed_after
from tests.netpolicy.test_hostguard import _guard_lines, _node_address, _own_expected, host_service  # noqa: F401

pytestmark = pytest.mark.docker


@pytest.fixture
def own_open(monkeypatch, docker_client):
    """An open network of the test's own as the one `open` sandboxes join, removed after."""
    net = own_network("open")
    monkeypatch.setattr(egress_module, "OPEN", net)
    monkeypatch.setattr(network_module, "NETWORKS", (REGISTRIES, net))
    with removed_after(docker_client, net):
        yield net


def _flush(net) -> None:
    """What a firewall reload does to the guard: the jump gone from INPUT, the chain emptied."""
    subprocess.run(["iptables", "-w", "5", "-D", "INPUT", "-i", net.bridge, "-j", net.chain], check=True)
    subprocess.run(["iptables", "-w", "5", "-F", net.chain], check=True)


def _spec(tmp_path, port: int, kind: str, **env) -> TrialSpec:
    spec = {"kind": f"tests.netpolicy.agents:{kind}", "env": {"HOST_PORT": str(port), "NODE_IP": _node_address(), **env}}
    cfg = SweepConfig(output=tmp_path / "runs", wheelhouses=[], pip_cache=False, agents=["host"],
                      agent_specs={"host": spec}, network_policy="open")
    task = next(t for t in load_suite("demo") if t.id == "numpy-trainer")
    return TrialSpec(sweep_id=f"guardwatch-{uuid.uuid4().hex[:6]}", agent="host", task=task, trial_index=0,
                     config=cfg, image=None)


def _refused(row: dict) -> None:
    assert row["status"] == "scored" and row["report_status"] == "ok", row["failure_reason"]
    out = row["agent_output_tail"]
    for name in ("host-service", "host-service-node-ip"):
        assert f"net: {name} failed: ConnectionRefusedError" in out, out


def test_a_flushed_guard_is_put_back_mid_trial_and_for_the_next_sandbox(sandbox_image, host_service, tmp_path,
                                                                        docker_client, own_open):
    from reb_ray.trial import run_trial

    port, accepted = host_service
    started, go = tmp_path / "started", tmp_path / "go"
    spec = _spec(tmp_path, port, "WaitThenProbeHostAgent", STARTED_FLAG=str(started), GO_FLAG=str(go))
    spec = spec.model_copy(update={"image": sandbox_image})
    rows: list[dict] = []
    trial = threading.Thread(target=lambda: rows.append(run_trial(spec).trial))
    trial.start()
    try:
        deadline = time.monotonic() + 180
        while not started.exists():
            assert time.monotonic() < deadline and trial.is_alive(), "the agent never started"
            time.sleep(0.1)
        gateway = docker_client.networks.get(own_open.name).attrs["IPAM"]["Config"][0]["Gateway"]
        assert _guard_lines(chain=own_open.chain) == _own_expected(own_open, gateway)
        before = guard_watch.reasserted()
        _flush(own_open)
        flushed = time.monotonic()
        assert _guard_lines(chain=own_open.chain) != _own_expected(own_open, gateway)  # open to the sandbox now
        while _guard_lines(chain=own_open.chain) != _own_expected(own_open, gateway):
            assert time.monotonic() - flushed < guard_watch.INTERVAL_S + 10, "the guard was not put back"
            time.sleep(0.05)
        restored_s = time.monotonic() - flushed
        assert guard_watch.reasserted() == before + 1
        print(f"guard restored {restored_s:.2f} s after the flush (interval {guard_watch.INTERVAL_S} s)")
    finally:
        go.touch()
        trial.join(timeout=300)
    _refused(rows[0])
    # A flush between trials: the next trial's sandbox is refused as well.
    _flush(own_open)
    _refused(run_trial(_spec(tmp_path, port, "HostServiceProbeAgent").model_copy(update={"image": sandbox_image})).trial)
    assert accepted == []
    assert _guard_lines(chain=own_open.chain) == _own_expected(own_open, gateway)
