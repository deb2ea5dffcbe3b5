"""A rootless Podman service for the tests, set up by root the way a cluster user would have it.

`RootlessPodman.ensure()` makes sure, idempotently: the packages (podman, uidmap for the
subordinate id ranges, slirp4netns, fuse-overlayfs), a non-root user `USER` with subuid/subgid
ranges, that user's containers.conf (rlimits under this machine's hard limits, the cgroupfs
manager and runc: a hybrid cgroup layout refuses crun and systemd) and storage.conf (runroot and
graphroot spelled out: on a fresh store Podman 4.3 commits over the API fail with "runroot must be
set" without them; overlay
through fuse-overlayfs: without it Podman falls back to vfs, and a container start copies the
whole image, 16-22 s instead of 0.3 s), the user's API service on `SOCKET`, and the sandbox
image in the user's store (`docker save` from the shared daemon into `podman load` over the
service, about 12 s once). Docker's daemon is used only as the image's source: the sandboxes
run on the user's engine.

`close()` stops the service if `ensure()` started it (a service found running is left).
Everything it needs it does as root; on a machine where it is not root or the packages cannot
be installed, `ensure()` raises PodmanUnavailableHere with the reason (the fixture skips).
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import time
from pathlib import Path

from reb_ray.sandbox.docker import podman_sandbox as pm

USER = "rebpod"
RUN_DIR = Path("/tmp/rebpod-run")
SOCKET = RUN_DIR / "podman.sock"
PACKAGES = ("podman", "uidmap", "slirp4netns", "fuse-overlayfs")

#: The user's configuration is what `reb-ray doctor` writes with its fix lines
#: (reb_ray.sandbox.docker.podman_sandbox.containers_conf / storage_conf).


class PodmanUnavailableHere(RuntimeError):
    """Podman cannot be set up on this machine (not root, or its packages cannot be installed)."""


def _run(argv: list[str], timeout: float = 600, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)


class RootlessPodman:
    """See the module docstring. `url` is the service's docker-SDK base URL."""

    def __init__(self, user: str = USER, socket: Path = SOCKET) -> None:
        self.user, self.socket = user, socket
        self.url = f"unix://{socket}"
        self.process: subprocess.Popen | None = None

    # -- set-up -----------------------------------------------------------------------------
    def ensure(self, image: str | None = None) -> None:
        if os.geteuid() != 0:
            raise PodmanUnavailableHere("the rootless Podman set-up needs root (to install packages and add a user)")
        self._packages()
        self._user()
        self._config()
        self._service()
        if image:
            self.load(image)

    def _packages(self) -> None:
        missing = [p for p in PACKAGES if _run(["dpkg-query", "-W", "-f=${Status}", p]).stdout.strip() != "install ok installed"]
        if not missing:
            return
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        _run(["apt-get", "update", "-qq"], env=env)
        proc = _run(["apt-get", "install", "-y", "-qq", *missing], env=env, timeout=900)
        if proc.returncode != 0:
            raise PodmanUnavailableHere(f"apt-get install {' '.join(missing)} failed: {proc.stderr.strip()[-300:]}")

    def _user(self) -> None:
        try:
            pwd.getpwnam(self.user)
        except KeyError:
            proc = _run(["useradd", "-m", "-s", "/bin/bash", self.user])
            if proc.returncode != 0:
                raise PodmanUnavailableHere(f"useradd {self.user} failed: {proc.stderr.strip()}") from None
        for path in ("/etc/subuid", "/etc/subgid"):
            text = Path(path).read_text() if Path(path).exists() else ""
            if not any(line.split(":")[0] == self.user for line in text.splitlines()):
                with open(path, "a") as f:  # useradd adds these when uidmap is installed first
                    f.write(f"{self.user}:100000:65536\n")

    @property
    def home(self) -> Path:
        return Path(pwd.getpwnam(self.user).pw_dir)

    def _config(self) -> None:
        entry = pwd.getpwnam(self.user)
        conf_dir = self.home / ".config" / "containers"
        storage = pm.STORAGE_CONF.format(runroot=f"{self._env()['XDG_RUNTIME_DIR']}/containers",
                                         graphroot=f"{self.home}/.local/share/containers/storage")
        wanted = {conf_dir / "containers.conf": pm.containers_conf(), conf_dir / "storage.conf": storage}
        changed = False
        for path, text in wanted.items():
            if not path.exists() or path.read_text() != text:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
                changed = True
        for path in [self.home / ".config", conf_dir, *wanted]:
            os.chown(path, entry.pw_uid, entry.pw_gid)
        if changed:  # a store made under another driver is reset (with the old storage.conf aside: vfs refuses
            # a reset under overlay options), else Podman keeps using it
            storage_conf = conf_dir / "storage.conf"
            storage_conf.rename(storage_conf.with_suffix(".new"))
            self.podman("system", "reset", "-f", check=False)
            storage_conf.with_suffix(".new").rename(storage_conf)

    def _env(self) -> dict[str, str]:
        entry = pwd.getpwnam(self.user)
        return {"HOME": entry.pw_dir, "USER": self.user, "LOGNAME": self.user, "PATH": "/usr/local/bin:/usr/bin:/bin",
                "XDG_RUNTIME_DIR": f"/tmp/podman-run-{entry.pw_uid}"}

    def podman(self, *args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
        """Run `podman ARGS` as the user (never as root); raises RuntimeError on failure when `check`."""
        proc = _run(["runuser", "-u", self.user, "--", "env", "-i", *[f"{k}={v}" for k, v in self._env().items()],
                     "podman", *args], timeout=timeout, cwd=str(self.home))
        if check and proc.returncode != 0:
            raise RuntimeError(f"podman {' '.join(args)} failed: {proc.stderr.strip()[-500:]}")
        return proc

    def answers(self) -> bool:
        """True when the service answers a ping on the socket."""
        from contextlib import closing

        import docker

        try:
            with closing(docker.DockerClient(base_url=self.url, timeout=5)) as client:
                return bool(client.ping())
        except Exception:  # noqa: BLE001 - any failure is "not answering"
            return False

    def _service(self, timeout_s: float = 60.0) -> None:
        if self.answers():
            return
        entry = pwd.getpwnam(self.user)
        RUN_DIR.mkdir(exist_ok=True)
        os.chown(RUN_DIR, entry.pw_uid, entry.pw_gid)
        if self.socket.exists():
            self.socket.unlink()
        log = open(RUN_DIR / "service.log", "ab")
        self.process = subprocess.Popen(
            ["runuser", "-u", self.user, "--", "env", "-i", *[f"{k}={v}" for k, v in self._env().items()],
             "podman", "system", "service", "--time=0", self.url],
            stdout=log, stderr=subprocess.STDOUT, cwd=str(self.home), start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            if self.answers():
                return
            time.sleep(0.2)
        tail = (RUN_DIR / "service.log").read_text(errors="replace")[-1500:]
        self.close()
        raise RuntimeError(f"the rootless Podman service did not start: {tail}")

    def client(self):
        import docker

        return docker.DockerClient(base_url=self.url, timeout=300)

    def load(self, image: str) -> None:
        """Copy `image` from the shared Docker daemon into the user's store (once)."""
        from reb_ray.sandbox.docker.docker_client import connect
        from reb_ray.sandbox.docker.image import transfer_image

        from contextlib import closing

        with closing(self.client()) as client:
            transfer_image(connect(), client, image)

    def close(self) -> None:
        """Stop the service if `ensure()` started it, and leave no process of its user: the
        service and its child re-executed in the user namespace (SIGTERM to the group), the
        pause process holding that namespace (`podman system migrate` stops it), and the
        conmon of each exec, which waits containers.conf's `exit_command_delay` after its exec."""
        if self.process is None:
            return
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=30)
        self.process = None
        self.podman("system", "migrate", check=False)
        deadline = time.monotonic() + 3 * pm.EXEC_CLEANUP_DELAY_S
        while self.processes() and time.monotonic() < deadline:
            time.sleep(0.5)

    def processes(self) -> list[str]:
        """Command lines of the user's live processes (zombies left to init are not counted)."""
        uid, found = pwd.getpwnam(self.user).pw_uid, []
        for proc in Path("/proc").glob("[0-9]*"):
            try:
                if proc.stat().st_uid == uid and (proc / "stat").read_text().rsplit(") ", 1)[-1][:1] != "Z":
                    found.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip())
            except OSError:
                continue
        return found


def podman_installed() -> bool:
    return shutil.which("podman") is not None
