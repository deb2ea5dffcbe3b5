"""A second, private Docker daemon on this machine, for tests that need a node's own Docker
(one lacking the sandbox image, one that is restarted mid-sweep) without touching the shared one.

Its default network is a bridge of its own, made here: `dockerd --bridge=none` would delete
the shared daemon's docker0 (moby's removeDefaultBridgeInterface), breaking every later
container on the default bridge. It manages no iptables rules (the shared daemon's stay as they
are), so its containers reach nothing outside this machine, which these tests never need.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator


def _bridge(name: str, address: str) -> None:
    subprocess.run(["ip", "link", "add", name, "type", "bridge"], check=True)
    subprocess.run(["ip", "addr", "add", address, "dev", name], check=True)
    subprocess.run(["ip", "link", "set", name, "up"], check=True)


class PrivateDockerd:
    """One private daemon: `sock` (a DOCKER_HOST URL), `root` (its files), `start()`, `stop()`;
    `stop()` then `start()` is a daemon restart: every container it ran is gone or stopped."""

    def __init__(self, root: Path, bridge: str) -> None:
        self.root, self.bridge = root, bridge
        self.sock = f"unix://{root}/docker.sock"
        self._proc: subprocess.Popen | None = None

    def start(self, timeout_s: float = 60.0) -> None:
        """Start the daemon and wait until it answers a ping; AssertionError with its log's tail otherwise."""
        import docker

        log = open(self.root / "dockerd.log", "a")
        ns = f"rr-{self.root.name}"
        self._proc = subprocess.Popen(
            ["dockerd", "--data-root", str(self.root / "data"), "--exec-root", str(self.root / "exec"),
             "--pidfile", str(self.root / "pid"), "-H", self.sock, "--bridge", self.bridge, "--iptables=false",
             "--ip6tables=false", "--ip-masq=false", "--containerd-namespace", ns,
             "--containerd-plugins-namespace", f"{ns}-p"], stdout=log, stderr=log)
        log.close()
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                docker.DockerClient(base_url=self.sock, timeout=5).ping()
                return
            except Exception:  # noqa: BLE001 - not up yet
                alive = self._proc.poll() is None and time.monotonic() < deadline
                assert alive, (self.root / "dockerd.log").read_text()[-1500:]
                time.sleep(0.5)

    def stop(self, timeout_s: float = 60.0) -> None:
        """SIGTERM and wait (Docker stops its containers first)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            self._proc.wait(timeout_s)
        self._proc = None


@contextlib.contextmanager
def private_dockerd() -> Iterator[PrivateDockerd]:
    """A started PrivateDockerd on a bridge of its own; stopped, its bridge and files removed after."""
    root = Path(tempfile.mkdtemp(prefix="reb-ray-d2-", dir="/tmp"))
    suffix = os.getpid() % 250 + 2
    bridge = f"rrtest{suffix}"
    subprocess.run(["ip", "link", "del", bridge], capture_output=True, check=False)  # one a killed run left
    _bridge(bridge, f"10.231.{suffix}.1/24")
    daemon = PrivateDockerd(root, bridge)
    try:
        daemon.start()
        yield daemon
    finally:
        daemon.stop()
        subprocess.run(["ip", "link", "del", bridge], capture_output=True, check=False)
        subprocess.run(["rm", "-rf", str(root)], check=False)
