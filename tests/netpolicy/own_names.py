"""Networks and guard chains of a test's own, named apart from reb-ray's.

A sweep may be running on the same Docker daemon and iptables while these tests run (another
user's, or a second test process): a test that removed or remade `reb-ray-registries` or
`reb-ray-open`, or rewrote or flushed their chains, would break that sweep's sandboxes (a trial
failing to join its network, or sandboxes open to the node, or shut out of their proxies, until
the guard's watch puts the chain back). So a test that removes, remakes, tampers with or
flushes a network or a chain does it to one of these: same code paths, names of its own.
"""

from __future__ import annotations

import uuid
from contextlib import contextmanager
from typing import Iterator

from reb_ray.netpolicy.hostguard import remove_guard
from reb_ray.netpolicy.network import SandboxNetwork


def own_network(policy: str = "registries") -> SandboxNetwork:
    """A network for `policy` as reb-ray makes its own, under names no sweep uses: Docker name
    `reb-ray-test-<hex>`, bridge `rbt<hex>` (within Linux's 15 characters), chain
    `REB-RAY-T-<HEX>-IN` (within iptables' 28)."""
    tag = uuid.uuid4().hex[:8]
    return SandboxNetwork(f"reb-ray-test-{tag}", f"rbt{tag}", internal=policy == "registries",
                          chain=f"REB-RAY-T-{tag.upper()}-IN", policy=policy)


@contextmanager
def removed_after(client, *nets: SandboxNetwork) -> Iterator[None]:
    """Removes `nets` (their Docker networks, chains and jumps) when the block ends."""
    try:
        yield
    finally:
        for net in nets:
            remove_guard(net.bridge, net.chain)
            for network in client.networks.list(names=[net.name]) if client is not None else []:
                if network.name == net.name:
                    network.remove()
