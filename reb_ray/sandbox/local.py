"""The local sandbox provider: a process group in a temporary directory on the host.

No isolation: it exists for machines without Docker and for trusted built-in agents (`noop`,
`heuristic`) only. An untrusted agent is refused unless the caller passes `allow_unsafe=True`
(the CLI's explicit `--unsafe-local` flag). Paths are host paths; the sandbox's own
directory is `root`, its working directory `root/work`.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import threading
import time
from pathlib import Path
from typing import Mapping, Sequence

from reb_ray.errors import UnsafeSandbox
from reb_ray.sandbox.base import (
    DEFAULT_READ_LIMIT,
    UnreadableFile,
    EXEC_MARKER_ENV,
    KILL_GRACE_S,
    ExecResult,
    Sandbox,
    SandboxCapabilities,
    SandboxConfig,
    SandboxSize,
    to_argv,
    tree_bytes,
)
from reb_ray.sandbox.output import OutputCapture, OutputSink
from reb_ray.sandbox.scratch import make_scratch

# Host variables a command needs to work at all; everything else is left behind on purpose
# (secrets, and CUDA_VISIBLE_DEVICES, which must never be forwarded).
_PASSTHROUGH_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SSL_CERT_FILE", "PIP_CERT", "REQUESTS_CA_BUNDLE")


class LocalSandbox(Sandbox):
    """A temporary directory plus process-group management on the host.

    Raises UnsafeSandbox when `trusted` is False and `allow_unsafe` is not set.
    """

    provider = "local"
    # Host processes in a host directory: nothing of a container, and its paths are the host's.
    capabilities = SandboxCapabilities(
        container_runtime=None, image=False, mounts=False, enforces_limits=False, own_network=False,
        fixed_paths=False, host_paths=True, commit=False, filesystem_diff=False, own_processes=False,
        own_interpreters=False,
    )

    def __init__(self, config: SandboxConfig, trusted: bool = False, allow_unsafe: bool = False) -> None:
        if not (trusted or allow_unsafe):
            raise UnsafeSandbox(
                "the local sandbox has no isolation and runs only trusted built-in agents (noop, heuristic); "
                "use `--sandbox docker`, or pass `--unsafe-local` to run this agent on the host anyway"
            )
        self.config = config
        self.root = make_scratch("reb-ray-local-")  # named for its owner: reaped if this process dies
        self.workdir = str(self.root / "work")
        Path(self.workdir).mkdir()
        self._markers: list[str] = []
        self._closed = False

    def lease_gpus(self, gpus: list[str]) -> None:
        """The probe phase of a GPU-sharing sweep now holds `gpus` (reb_ray.trial.phase_split); here
        GPUs are only CUDA_VISIBLE_DEVICES, so the same sandbox carries on with them."""
        self.config = self.config.model_copy(update={"gpus": list(gpus), "shared_gpus": False})

    def _env(self, env: Mapping[str, str] | None, marker: str) -> dict[str, str]:
        base = {k: os.environ[k] for k in _PASSTHROUGH_ENV if k in os.environ}
        base.update({k: v for k, v in self.config.env.items() if k != "CUDA_VISIBLE_DEVICES"})
        base["CUDA_VISIBLE_DEVICES"] = ",".join(self.config.gpus)
        base.update(env or {})
        base[EXEC_MARKER_ENV] = marker
        return base

    def exec(
        self,
        cmd: str | Sequence[str],
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        workdir: str | None = None,
        user: str | None = None,
        *,
        watch: Sequence[str] = (),
        sink: OutputSink | None = None,
    ) -> ExecResult:
        import uuid

        if user is not None:  # host processes run as the harness's user: another cannot be honoured
            raise ValueError(f"the {self.provider} sandbox runs commands as the harness's own user, not as {user!r}")
        marker = uuid.uuid4().hex
        self._markers.append(marker)
        out = OutputCapture(self.config.head_bytes, self.config.tail_bytes, watch, sink)
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                to_argv(cmd),
                cwd=workdir or self.workdir,
                env=self._env(env, marker),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            out.feed(f"{exc}\n".encode())
            return ExecResult(exit_code=127, duration_s=time.monotonic() - start, **out.finish())
        reader = threading.Thread(target=_drain, args=(proc.stdout, out), daemon=True)
        reader.start()
        timed_out = False
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(KILL_GRACE_S)
            except subprocess.TimeoutExpired:
                pass
            kill_marked(marker)
            proc.wait()
        duration = time.monotonic() - start
        # A background child may still hold the pipe open: drain what is in flight, then stop.
        out.wait_for_reader(reader)
        proc.stdout.close() if not reader.is_alive() else None
        return ExecResult(exit_code=proc.returncode, timed_out=timed_out, duration_s=duration, **out.finish())

    def _path(self, path: str) -> Path:
        return Path(path) if os.path.isabs(path) else Path(self.workdir) / path

    def put(self, src: Path | str, dest: str) -> None:
        src, target = Path(src), self._path(dest)
        if not src.exists():
            raise FileNotFoundError(f"{src} does not exist")
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, target, symlinks=True, dirs_exist_ok=True)
        else:
            shutil.copy2(src, target)

    def get(self, src: str, dest: Path | str) -> None:
        source, dest = self._path(src), Path(dest)
        if not source.exists():
            raise FileNotFoundError(f"{source} not found in sandbox")
        dest.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, dest, symlinks=True, dirs_exist_ok=True)
        else:
            shutil.copy2(source, dest)

    def read_bytes(self, src: str, limit: int = DEFAULT_READ_LIMIT) -> bytes:
        path = self._path(src)
        try:  # O_NOFOLLOW: a symlink is refused, not followed; O_NONBLOCK: a FIFO cannot hang us
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            raise FileNotFoundError(f"{path} not found in sandbox") from None
        except OSError as exc:
            if os.path.islink(path):
                raise UnreadableFile(f"{path}: a symlink, not a regular file") from None
            raise UnreadableFile(f"{path}: {exc.strerror}") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise UnreadableFile(f"{path}: not a regular file (mode {stat.filemode(st.st_mode)})")
            if st.st_size > limit:
                raise UnreadableFile(f"{path}: {st.st_size} bytes, over the {limit}-byte limit")
        except BaseException:
            os.close(fd)
            raise
        with os.fdopen(fd, "rb") as f:
            data = f.read(limit + 1)
        if len(data) > limit:  # grew after the stat
            raise UnreadableFile(f"{path}: over the {limit}-byte limit")
        return data

    def size(self, timeout: float = 60.0) -> SandboxSize:
        return SandboxSize(bytes=tree_bytes(self.root), method="local_walk")

    def kill_leftovers(self) -> list[str]:
        return [cmd for marker in self._markers for cmd in kill_marked(marker)]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.kill_leftovers()
        shutil.rmtree(self.root, ignore_errors=True)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def kill_marked(marker: str) -> list[str]:
    """SIGKILL every host process whose environment holds REB_RAY_EXEC_ID=`marker` (Linux /proc).

    Returns the command lines (argv joined by spaces) of the processes killed, one per pid.
    """
    needle = f"{EXEC_MARKER_ENV}={marker}".encode()
    killed: dict[int, str] = {}
    for _ in range(5):
        marked = [pid for pid in _pids() if _has_env(pid, needle)]
        # Stop them all first, so none forks, or exits on its own because its child died.
        for pid in marked:
            _signal(pid, signal.SIGSTOP)
        for pid in marked:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            except OSError:
                cmd = ""
            if _signal(pid, signal.SIGKILL) and cmd:  # a zombie's command line is empty: it had exited
                killed.setdefault(pid, cmd)
        if not marked:
            break
        time.sleep(0.05)
    return list(killed.values())


def _pids() -> list[int]:
    return [int(e.name) for e in os.scandir("/proc") if e.name.isdigit() and int(e.name) != os.getpid()]


def _has_env(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return needle in f.read().split(b"\0")
    except OSError:
        return False


def _signal(pid: int, sig: int) -> bool:
    try:
        os.kill(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _drain(pipe, out: OutputCapture) -> None:
    try:
        for chunk in iter(lambda: pipe.read1(65536), b""):
            out.feed(chunk)
    except (OSError, ValueError):
        pass
