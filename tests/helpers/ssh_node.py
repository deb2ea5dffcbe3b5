"""A real SSH-reachable node on this machine, for `ray up` tests: an sshd on 127.0.0.1 with a
fresh key pair, in its own PID, UTS and mount namespaces.

Why namespaces: this machine runs other Ray instances (other tests, other users), and `ray up` /
`ray down` run a bare `ray stop`, which kills every Ray process it can see. In the node's PID
namespace it sees only the node's own. The node's own host name keeps reb-ray's reaper (which
only touches containers whose owner ran on *its* host) away from everyone else's containers, and
theirs away from the node's. `HOME` and `RAY_TMPDIR` (set by sshd for every session) give the
node its own home (venv, ~/.bashrc, results) and Ray directory. Network, file system and the
Docker daemon are shared, as on a real node that runs one daemon. When the node stops, the
kernel kills everything left in its namespace.

pip on the node gets this machine's pip settings (`pip_settings`): the user's pip configuration
copied into the node's home, and the `PIP_*` variables of this process (its package indexes and
wheel directories, its cache). A node's fresh home would otherwise send `scripts/setup.sh`'s
install of reb-ray's dependencies to the public index for every package again, which is the
network's time, not what a test of setting a node up is about. It installs without
byte-compiling (PIP_COMPILE=0, DECISIONS "Keeping the full suite's time down"): Python writes
the bytecode of what the node's processes import as they first import it.

Needs root, `/usr/sbin/sshd` (openssh-server), `ssh-keygen`, `nc` (netcat-openbsd: the SSH
proxy command, since Ray's cluster config has no SSH port) and `unshare` (util-linux).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

SSHD = "/usr/sbin/sshd"
TOOLS = (SSHD, "ssh", "ssh-keygen", "nc", "unshare", "rsync")


def missing_tools() -> list[str]:
    """The programs a node needs that this machine lacks (empty when all are there)."""
    return [t for t in TOOLS if shutil.which(t) is None and not Path(t).is_file()]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class SshNode:
    """One running node. `key` logs in as `user` at `ip` through `proxy_command` (port `port`)."""

    ip: str
    port: int
    user: str
    key: Path
    home: Path
    ray_tmpdir: Path
    hostname: str
    process: subprocess.Popen

    @property
    def proxy_command(self) -> str:
        return f"nc {self.ip} {self.port}"

    def ssh(self, command: str, timeout: float = 60) -> subprocess.CompletedProcess:
        """Run `command` on the node in a login shell, as Ray does; output captured as text."""
        argv = ["ssh", "-i", str(self.key), "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                "-o", "IdentitiesOnly=yes", "-o", "LogLevel=ERROR", "-o", f"ProxyCommand={self.proxy_command}",
                f"{self.user}@{self.ip}", f"bash --login -c {_quote(command)}"]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)

    def processes(self) -> dict[int, str]:
        """pid (as this machine sees it) -> command line, of every process in the node's namespace."""
        own = _pid_ns(self.process.pid, child=True)
        found: dict[int, str] = {}
        if own is None:
            return found
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and _pid_ns(int(entry.name)) == own:
                try:
                    cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
                except OSError:
                    continue
                found[int(entry.name)] = cmdline
        return found

    def stop(self) -> None:
        """Stop the node: SIGKILL to `unshare` (it ignores SIGTERM while it waits), whose
        --kill-child kills sshd, the namespace's init; the kernel then kills all left in it."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)
        shutil.rmtree(self.ray_tmpdir, ignore_errors=True)


#: The user's pip configuration files, relative to the home directory (pip reads those that exist).
PIP_USER_CONFIGS = (".config/pip/pip.conf", ".pip/pip.conf")


def pip_settings(home: Path) -> dict[str, str]:
    """This machine's pip settings for a node whose home is `home` (module docstring): copies
    the user's pip configuration files there; returns the variables its sessions get."""
    here = Path.home()
    for rel in PIP_USER_CONFIGS:
        if (here / rel).is_file():
            (home / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(here / rel, home / rel)
    env = {k: v for k, v in os.environ.items() if k.startswith("PIP_") and not any(c.isspace() or c == '"' for c in v)}
    env.setdefault("PIP_CACHE_DIR", str(here / ".cache" / "pip"))
    env["PIP_COMPILE"] = "0"
    return env


def start_node(workdir: Path, hostname: str, ip: str = "127.0.0.1", timeout_s: float = 30) -> SshNode:
    """Start a node whose files live under `workdir`; returns once `ssh` logs in. Raises
    RuntimeError (with sshd's log) when it does not within `timeout_s` seconds."""
    workdir.mkdir(parents=True, exist_ok=True)
    home = workdir / "home"
    home.mkdir(exist_ok=True)
    pip = " ".join(f'"{k}={v}"' for k, v in sorted(pip_settings(home).items()))
    # Short: Ray's socket paths under it must stay below the 107-byte limit of AF_UNIX.
    ray_tmpdir = Path(tempfile.mkdtemp(prefix="rebct-", dir="/tmp"))
    key, host_key = workdir / "id_ed25519", workdir / "ssh_host_ed25519_key"
    for path in (key, host_key):
        if not path.exists():
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    (workdir / "authorized_keys").write_text(Path(f"{key}.pub").read_text())
    port = free_port()
    config = workdir / "sshd_config"
    config.write_text("\n".join([
        f"ListenAddress {ip}:{port}",
        f"HostKey {host_key}",
        f"AuthorizedKeysFile {workdir / 'authorized_keys'}",
        f"PidFile {workdir / 'sshd.pid'}",
        "PermitRootLogin prohibit-password",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "StrictModes no",  # pytest's temp directories are not owner-only
        "MaxSessions 64",
        "MaxStartups 64",
        f"SetEnv HOME={home} RAY_TMPDIR={ray_tmpdir} {pip}",
        "Subsystem sftp internal-sftp",
        "",
    ]))
    Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege separation directory
    log = open(workdir / "sshd.log", "ab")
    process = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", "--uts", "--kill-child",
         "sh", "-c", f"hostname {hostname} && exec {SSHD} -D -e -f {config}"],
        stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    node = SshNode(ip, port, "root", key, home, ray_tmpdir, hostname, process)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        try:
            if node.ssh("hostname", timeout=10).stdout.strip() == hostname:
                return node
        except subprocess.TimeoutExpired:
            pass
        time.sleep(0.3)
    node.stop()
    raise RuntimeError(f"sshd on {ip}:{port} did not accept the key within {timeout_s:.0f} s: "
                       + (workdir / "sshd.log").read_text()[-2000:])


def _pid_ns(pid: int, child: bool = False) -> str | None:
    """The PID namespace of `pid` (of its only child when `child`: unshare forks the init)."""
    try:
        if child:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            if not children:
                return None
            pid = int(children[0])
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def _quote(command: str) -> str:
    return "'" + command.replace("'", "'\\''") + "'"
