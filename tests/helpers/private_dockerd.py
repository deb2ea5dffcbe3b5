"""A private Docker daemon for tests that stop or restart Docker (F20), never the shared one.

`PrivateDockerd(root)` runs `dockerd` with its own unix socket, data root, exec root (and so its
own containerd), pid file and an empty config file (not /etc/docker/daemon.json), a bridge of
its own made here, no iptables rules and no IP forwarding: it touches no other network state of
this machine, reb-ray's bridges and chains (reb_ray/netpolicy/) included. (`--bridge=none`
would not do: dockerd then deletes the shared daemon's docker0, moby's
removeDefaultBridgeInterface, and every later container on the default bridge fails.) Its
containers use `network = "none"` (a sweep's explicit network, recorded in its rows). `load(image)` copies an
image from the shared daemon (`docker save`, then `docker load`; the archive is kept beside
`root` per image id so a second test loads without saving). `stop()` is a graceful stop
(SIGTERM: the daemon stops its containers and exits), `start()` starts it again on the same
state, `close()` stops it and removes its state.

`root` must be a short path: a unix socket's path has at most 107 bytes.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path


class PrivateDockerd:
    """See the module docstring. `host` is its DOCKER_HOST value."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.bridge = f"rrtest{os.getpid() % 250 + 2}"  # at most 15 characters, one per test process
        (root / "daemon.json").write_text("{}\n")
        self.host = f"unix://{root / 'docker.sock'}"
        self.process: subprocess.Popen | None = None

    def _env(self) -> dict[str, str]:
        return {**os.environ, "DOCKER_HOST": self.host}

    def start(self, timeout_s: float = 60.0) -> None:
        """Start the daemon and wait until it answers. Raises RuntimeError with its log's end."""
        self._make_bridge()
        log = open(self.root / "dockerd.log", "ab")
        self.process = subprocess.Popen(
            ["dockerd", "-H", self.host, "--data-root", str(self.root / "data"), "--exec-root", str(self.root / "exec"),
             "--pidfile", str(self.root / "docker.pid"), "--config-file", str(self.root / "daemon.json"),
             "--bridge", self.bridge, "--iptables=false", "--ip-forward=false", "--ip-masq=false", "--userland-proxy=false",
             "--log-level", "warn"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            if self.docker("info", check=False, timeout=10).returncode == 0:
                return
            time.sleep(0.2)
        tail = (self.root / "dockerd.log").read_text(errors="replace")[-2000:]
        self.stop()
        raise RuntimeError(f"private dockerd did not start: {tail}")

    def _make_bridge(self) -> None:
        if subprocess.run(["ip", "link", "show", self.bridge], capture_output=True).returncode == 0:
            return  # a restart: the bridge is still there
        subnet = f"10.231.{os.getpid() % 250 + 2}.1/24"
        for cmd in (["link", "add", self.bridge, "type", "bridge"], ["addr", "add", subnet, "dev", self.bridge],
                    ["link", "set", self.bridge, "up"]):
            subprocess.run(["ip", *cmd], check=True, capture_output=True)

    def stop(self, timeout_s: float = 60.0) -> None:
        """SIGTERM the daemon and wait for it to exit (SIGKILL after `timeout_s`)."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def docker(self, *args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
        """`docker ARGS` against this daemon."""
        return subprocess.run(["docker", *args], env=self._env(), capture_output=True, text=True, check=check,
                              timeout=timeout)

    def load(self, image: str) -> None:
        """Copy `image` from the shared daemon (DOCKER_HOST as this process has it) into this one."""
        image_id = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", image], capture_output=True,
                                  text=True, check=True).stdout.strip()
        archive = self.root.parent / f"{image_id.replace(':', '-')}.tar"
        if not archive.exists():
            partial = archive.with_suffix(".partial")
            subprocess.run(["docker", "save", "-o", str(partial), image], check=True, timeout=300)
            partial.rename(archive)
        self.docker("load", "-i", str(archive))

    def close(self) -> None:
        """Remove every container, stop the daemon and delete its state (not the image archive)."""
        if self.process is not None and self.process.poll() is None:
            ids = self.docker("ps", "-aq", check=False).stdout.split()
            if ids:
                self.docker("rm", "-f", "-v", *ids, check=False)
        self.stop()
        subprocess.run(["umount", "-R", str(self.root / "exec")], capture_output=True)  # netns / shm mounts, if any
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)
