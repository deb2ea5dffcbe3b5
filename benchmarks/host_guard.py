"""What the host guard costs a trial start.

On this node (root, real iptables, real Docker): N times each (default 10), the steady-state
`ensure_guard` of each reb-ray network (the chain already made: what every trial start after
the node's first pays), and the whole `TrialEgress.open` of an `open` trial (the network's
check with the daemon plus the guard's), and a sandbox's start and removal on Docker's default
bridge against reb-ray-open (alternating). Prints median, min and max milliseconds.

Usage: python benchmarks/host_guard.py [N]
"""

from __future__ import annotations

import statistics
import sys
import time

from reb_ray.models.sweep import SweepConfig
from reb_ray.netpolicy.hostguard import ensure_guard
from reb_ray.netpolicy.network import NETWORKS, ensure_network
from reb_ray.netpolicy.ports import sandbox_ports
from reb_ray.trial.egress import TrialEgress
from reb_ray.sandbox import SandboxConfig
from reb_ray.sandbox.docker.docker_client import connect
from reb_ray.sandbox.docker.docker_sandbox import DockerSandbox
from reb_ray.sandbox.docker.image import require_image


def _ms(f, n: int) -> list[float]:
    times = []
    for _ in range(n):
        started = time.perf_counter()
        f()
        times.append((time.perf_counter() - started) * 1000)
    return times


def _show(name: str, times: list[float]) -> None:
    print(f"{name:<38} median {statistics.median(times):6.2f} ms (min {min(times):.2f}, max {max(times):.2f}, "
          f"n={len(times)})")


def main(n: int = 10) -> None:
    client, ports = connect(), sandbox_ports()
    for net in NETWORKS:
        gateway = ensure_network(client, net)
        ensure_guard(net.bridge, gateway, ports, net.chain)  # made once: the runs below are the steady state
        _show(f"ensure_guard {net.chain}", _ms(lambda: ensure_guard(net.bridge, gateway, ports, net.chain), n))
    base = SandboxConfig(image="unused", sweep_id="bench", trial_id="guard")
    _show("TrialEgress.open (policy open)", _ms(lambda: TrialEgress(SweepConfig()).open(base), n))
    image = require_image(client, "minimal")
    starts: dict[str, list[float]] = {"bridge": [], "reb-ray-open": []}
    for i in range(n):
        for network in (("bridge", "reb-ray-open") if i % 2 == 0 else ("reb-ray-open", "bridge")):
            config = SandboxConfig(image=image, network=network, sweep_id="bench", trial_id=f"guard-{i}")
            starts[network] += _ms(lambda: DockerSandbox(config, client).close(), 1)
    for network, times in starts.items():
        _show(f"sandbox start+remove on {network}", times)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
