"""The sandbox interface: the isolated place one trial runs.

Four providers implement it: `docker` (a container per trial, the default) and `podman` (the
same on a Podman service), both in reb_ray/sandbox/docker/ since they speak the Docker Engine
API; `local` (a process group in a temporary directory, for machines without Docker and
trusted built-in agents only) and `sleep` (the local one whose commands only take scripted
time, for scheduling benchmarks). The same conformance tests run against docker, podman and
local. What differs between providers is stated by each provider class, as its
`SandboxCapabilities` and, for what carries a value, as the class attributes and class
methods declared here (its engine, its leftovers' kill script), and asked of those, never of
the provider's name.
"""

from __future__ import annotations

import abc
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

from pydantic import BaseModel, Field

from reb_ray.errors import RebRayError
from reb_ray.sandbox.output import DEFAULT_HEAD_BYTES, DEFAULT_TAIL_BYTES, OutputSink

if TYPE_CHECKING:
    import docker

GiB = 1024**3

#: Default pids limit of a sandbox (processes and threads): far above what a build with
#: `make -j` or a DataLoader with many workers starts, far below the node's pid_max. Enforced
#: by providers that enforce limits (`SandboxCapabilities.enforces_limits`).
DEFAULT_PIDS_LIMIT = 4096

#: Bytes `Sandbox.read_bytes` reads at most unless told otherwise (the per-attempt artifact bound).
DEFAULT_READ_LIMIT = 64 * 1024**2
#: The image's system PATH, nothing of the agent's shell: what the harness's own commands run under.
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class UnreadableFile(ValueError):
    """A sandbox path that `Sandbox.read_bytes` refuses: not a regular file, or over its limit.

    The agent made it so (it owns the sandbox), so callers record it as the agent's, never as
    infrastructure.
    """

#: Environment variable set on every exec; its value identifies the exec so that the command
#: and every descendant (even ones that called setsid) can be found and killed.
EXEC_MARKER_ENV = "REB_RAY_EXEC_ID"

#: Extra seconds after SIGTERM before SIGKILL when an exec's deadline fires.
KILL_GRACE_S = 2.0


class ExecResult(BaseModel):
    """Outcome of one `Sandbox.exec` call.

    `exit_code` is None only when the exit status could not be read (the sandbox died).
    `output` is stdout and stderr interleaved, bounded to head + tail; `dropped_bytes` counts
    the bytes cut from it, `total_bytes` all bytes the command printed. `duration_s` is
    host-measured wall time in seconds. `pattern_matches` holds, for each regex the exec was
    asked to `watch`, whether it matched the WHOLE output (re.MULTILINE, searched as it
    streamed; reb_ray.sandbox.watch), not only the kept head and tail.
    """

    exit_code: int | None
    timed_out: bool = False
    duration_s: float
    output: str = ""
    truncated: bool = False
    dropped_bytes: int = 0
    total_bytes: int = 0
    pattern_matches: dict[str, bool] = Field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when the command exited 0 within its deadline."""
        return self.exit_code == 0 and not self.timed_out


class SandboxSize(BaseModel):
    """Bytes written into the sandbox (the container's writable layer), and how it was measured."""

    bytes: int | None
    method: str


class SandboxConfig(BaseModel):
    """What a sandbox is created with. Sizes are bytes, CPU limits are cores.

    `gpus` are physical GPU ids on the node (indices like "0" or UUIDs like "GPU-..."); inside,
    devices are numbered from 0. The host's CUDA_VISIBLE_DEVICES is never forwarded.
    """

    image: str | None = None
    workdir: str = "/work"
    gpus: list[str] = Field(default_factory=list)
    cpus: float | None = None
    memory_bytes: int | None = None  # memory and memory+swap limit; None: none
    pids_limit: int | None = DEFAULT_PIDS_LIMIT  # processes and threads (enforced: reb_ray.sandbox.docker.hardening)
    disk_quota_bytes: int | None = None  # writable layer, watched in the agent phase (reb_ray.sandbox.limits)
    shm_size_bytes: int = 16 * GiB
    network: str = "bridge"
    ca_bundle: Path | None = None
    env: dict[str, str] = Field(default_factory=dict)
    mounts: dict[str, str] = Field(default_factory=dict, description="host path -> sandbox path, read-only")
    rw_mounts: dict[str, str] = Field(default_factory=dict, description="host path -> sandbox path, writable (caches)")
    # Read-only with bind propagation rslave: what the host later mounts below the host path
    # appears inside, and disappears on unmount (the agent toolchain: agents/toolchain_mount.py).
    propagated_mounts: dict[str, str] = Field(default_factory=dict, description="host path -> sandbox path, read-only, rslave")
    labels: dict[str, str] = Field(default_factory=dict)
    # True: `gpus` are shown to the agent phase but held by nobody (a GPU-sharing sweep); the
    # probe phase's GPUs are leased later (reb_ray.trial.phase_split).
    shared_gpus: bool = False
    sweep_id: str = ""
    trial_id: str = ""
    attempt: int = 0
    head_bytes: int = DEFAULT_HEAD_BYTES
    tail_bytes: int = DEFAULT_TAIL_BYTES


def git_blob(data: bytes) -> str:
    """The git blob hash of `data`: hex SHA-1 of b"blob <length>\\0" + data (what `git
    hash-object --no-filters` prints)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass(frozen=True)
class SandboxProcess:
    """One process of a sandbox as its engine lists it from outside (the container's cgroup,
    `docker top`): the host's PID and parent PID, the command line, and whether the harness
    started it (`own`: its host PID is one recorded when the sandbox started; never judged by
    command line, parent or session)."""

    pid: int
    ppid: int
    command: str
    own: bool


@dataclass(frozen=True)
class SandboxCapabilities:
    """What a sandbox provider can do, asked by the harness instead of the provider's name, so a
    new provider (a rootless Podman one, say) says what it supports in one place and every
    caller follows. Each field is named after the question a caller asks:

    - `container_runtime`: the runtime recorded in the trials row's `container_runtime` column
      ("docker"); None for a provider whose commands run as host processes.
    - `image`: runs from an image that the node must hold, through a daemon: the harness waits
      for the daemon before an attempt, reaps orphans and checks the image before a sweep, ships
      the image to nodes, and starts its own containers of that image (the package-cache fill).
    - `mounts`: takes host directories as bind mounts when it opens (wheelhouses, assets, the
      node's pip cache, the agent toolchain slot at its fixed sandbox path); without it the
      harness hands host paths over as they are.
    - `enforces_limits`: enforces the config's cpus, memory, pids, disk quota and /dev/shm size
      (and so the row records them and the limit watch runs); without it they are not applied.
    - `own_network`: joins a Docker network of its own, so the host guard, the allow-listing
      egress proxy and an LLM proxy bound on the network's gateway are possible; without it the
      sandbox shares the node's network (the LLM proxy binds on loopback).
    - `fixed_paths`: has a filesystem of its own, so the image's fixed paths (the report path,
      /opt/envs/...) are used as they are; without it paths are placed beside the workdir.
    - `host_paths`: a sandbox path is the host path of the same name, so the harness copies
      files in with host calls instead of `put`.
    - `commit`: can be committed to an image (the kept environment; the probe sandbox of a
      GPU-sharing sweep, started from the agent sandbox's image).
    - `filesystem_diff`: the runtime lists the files changed since the image (the environment
      manifest's diff).
    - `own_processes`: has its own process namespace, so a search by command line finds only
      the sandbox's processes (never the host's or another trial's).
    - `own_interpreters`: its interpreters are its own, so the harness may write a `.pth` file
      into their site-packages (never into the host's).
    """

    container_runtime: str | None
    image: bool
    mounts: bool
    enforces_limits: bool
    own_network: bool
    fixed_paths: bool
    host_paths: bool
    commit: bool
    filesystem_diff: bool
    own_processes: bool
    own_interpreters: bool


def killed_commands(listing: str) -> list[str]:
    """Command lines from "PID<TAB>command" lines, one per PID (a process still dying when
    the next round looked is listed again), in the order first seen."""
    seen: dict[str, str] = {}
    for line in listing.splitlines():
        pid, sep, cmd = line.partition("\t")
        if sep and pid.isdigit() and cmd.strip():
            seen.setdefault(pid, cmd.strip())
    return list(seen.values())


def tree_bytes(root: Path) -> int:
    """Bytes of regular files under `root`, each inode once, symlinks not followed."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) in seen or not (st.st_mode & 0o170000 == 0o100000):
                continue
            seen.add((st.st_dev, st.st_ino))
            total += st.st_size
    return total


def to_argv(cmd: str | Sequence[str]) -> list[str]:
    """A shell line becomes `sh -c LINE`; an argv list is used as-is."""
    if isinstance(cmd, str):
        return ["/bin/sh", "-c", cmd]
    if not cmd:
        raise ValueError("empty command")
    return list(cmd)


class Sandbox(abc.ABC):
    """An isolated place to run one trial: exec, put/get files, size, close.

    Use as a context manager: `close()` always runs, also after exceptions, and removes
    everything the sandbox created. Paths are in the sandbox's own namespace.
    """

    provider: str = ""
    #: What this provider can do (each provider class sets its own; a view copies its inner's).
    capabilities: SandboxCapabilities
    workdir: str = ""
    #: The shell text `kill_leftovers` runs as root inside the sandbox, for a caller that folds
    #: the kill into one root script of its own (reb_ray.trial.between_phases: one exec
    #: instead of three). It prints one "PID<TAB>command line" line per process it killed
    #: (`killed_commands` reads them) and spares the shell running it and that shell's parent.
    #: None (the default): `kill_leftovers` is no script run inside the sandbox (the local
    #: provider signals host process groups; the sleeping one only changes phase).
    leftovers_script: str | None = None

    # -- the engine: class-level, asked of `provider_class(name)` before any sandbox opens ------
    # A provider whose sandboxes run on a container engine (`capabilities.image`: the Docker
    # daemon, a Podman service, both reached through the Docker Engine API) overrides all of
    # these. The defaults are those of a provider without an engine (local, sleep): nothing to
    # wait for, nothing to warn about, no image to build; asking it for a client or an image
    # is a caller's mistake and raises RebRayError saying so.

    #: The engine's name in one-line messages (node checks, doctor, `reb-ray image build`); None:
    #: the provider runs no engine.
    engine_name: str | None = None
    #: Whether `reb-ray image build` builds the sandbox image on this provider's engine (False:
    #: it is built with Docker and copied into the engine, or, without an engine, not needed).
    builds_images: bool = False

    @classmethod
    def connect_engine(cls, timeout: float = 120.0) -> "docker.DockerClient":
        """A pinged client of the engine this provider's sandboxes run on; `timeout` is seconds
        per request. Raises DockerUnavailable with the fix; RebRayError for a provider without
        an engine."""
        raise RebRayError(f"sandbox provider {cls.provider!r} runs no container engine: there is nothing to connect to")

    @classmethod
    def wait_for_engine(cls) -> None:
        """Return once the engine answers (a restarting one is waited for, bounded; InfraError
        `infra_daemon` when it does not come back). Without an engine: at once."""

    @classmethod
    def require_image(cls, client: "docker.DockerClient", profile: str) -> str:
        """The sandbox image tag of `profile` if the engine behind `client` holds it. Raises
        ImageMissing with the fix; RebRayError for a provider without an engine (it runs no image)."""
        raise RebRayError(f"sandbox provider {cls.provider!r} runs no image: there is no image of profile {profile!r} to require")

    @classmethod
    def image_fix(cls, tag: str) -> str:
        """How to bring the sandbox image `tag` to this provider's engine, in a few words (the
        node check's line for a missing image). Without an engine no image is ever missing: it
        says so."""
        return f"the {cls.provider} sandbox runs no image"

    @classmethod
    def start_warnings(cls) -> list[str]:
        """Lines a sweep prints at its start about what this node's engine will not do for these
        sandboxes (e.g. limits a rootless engine drops). Without an engine: none (what a
        provider without one lacks is stated by its capabilities, and the sweep's own checks
        warn about it)."""
        return []

    # -- the sandbox ----------------------------------------------------------------------------
    @abc.abstractmethod
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
        """Run `cmd` (argv list, or a shell line run by /bin/sh) and wait for it.

        `timeout` is seconds; when it fires the command receives SIGTERM, then SIGKILL after
        KILL_GRACE_S, and every descendant is killed before this returns (`timed_out=True`).
        A command that starts a background process and exits returns as soon as it exits.
        `user`: the sandbox's user to run as (None: the sandbox's default); a provider whose
        commands are host processes has no users of its own and refuses any other value
        (ValueError). `watch`: regexes searched in the whole output while it streams (result in
        `pattern_matches`; raises re.error for one that does not compile). `sink`: gets every
        output byte as it arrives (nothing after this returns). Raises RebRayError if the
        sandbox is gone.
        """

    @abc.abstractmethod
    def put(self, src: Path | str, dest: str) -> None:
        """Copy host file or directory `src` to sandbox path `dest` (parents are created)."""

    @abc.abstractmethod
    def get(self, src: str, dest: Path | str) -> None:
        """Copy sandbox file or directory `src` to host path `dest`. Raises FileNotFoundError."""

    def put_tar(self, archive: Path, dest_dir: str) -> None:
        """Unpack the host tar file `archive` into sandbox directory `dest_dir` (created).

        Providers may do this in one call (Docker's put_archive); the default unpacks on the
        host and puts each top-level entry.
        """
        import tarfile
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            with tarfile.open(archive) as tar:
                tar.extractall(tmp, filter="data")
            for entry in Path(tmp).iterdir():
                self.put(entry, f"{dest_dir.rstrip('/')}/{entry.name}")

    def write_bytes(self, dest: str, data: bytes) -> None:
        """Create sandbox file `dest` holding `data`."""
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / Path(dest).name
            path.write_bytes(data)
            self.put(path, dest)

    @abc.abstractmethod
    def read_bytes(self, src: str, limit: int = DEFAULT_READ_LIMIT) -> bytes:
        """Contents of the regular sandbox file `src`, at most `limit` bytes.

        Everything under the sandbox is the agent's to shape, so this never follows a symlink
        and never opens a FIFO, device, socket or directory (a link to /proc/self/environ or a FIFO
        that never ends must not leak a secret or hang the harness). Raises
        FileNotFoundError when `src` does not exist, UnreadableFile when it is not a regular
        file or holds more than `limit` bytes.
        """

    @abc.abstractmethod
    def size(self, timeout: float = 60.0) -> SandboxSize:
        """Bytes written into the sandbox so far; `timeout` seconds before the fallback method."""

    @abc.abstractmethod
    def kill_leftovers(self) -> list[str] | None:
        """Kill every process started in the sandbox (by any exec), keeping the sandbox usable.

        Used between the agent and probe phases: nothing the agent left running may touch
        the probes. Returns the command lines (argv joined by spaces) of the processes it
        killed, one per process, in the order killed (empty when nothing was running), or None
        when the sandbox could not be asked (it is gone). Never raises for a gone sandbox.
        """

    def filesystem_changes(self) -> list[dict] | None:
        """The paths changed since the image, as the engine's API lists them
        ([{"Path": "/a", "Kind": 0 changed | 1 added | 2 deleted}]); None where the provider
        cannot list them (`capabilities.filesystem_diff` False). Raises what the engine raises."""
        return None

    def process_table(self) -> list[SandboxProcess] | None:
        """Every process of the sandbox as its engine sees it from outside, where no process of
        the sandbox can hide or rename one (`SandboxProcess`); None where the provider cannot
        list them (the default: no engine, or it did not answer). Never raises."""
        return None

    def blobs_outside(self, root: str, paths: list[str]) -> dict[str, str | None] | None:
        """The git blob hash (hex SHA-1 of "blob <size>\\0" + content, `git_blob`) of each of
        `paths` (relative to sandbox directory `root`) as the engine reads it from outside the
        sandbox, no program of the sandbox involved: of a regular file's bytes, of a symbolic
        link's target; None for a path that is missing, no regular file or link (a directory,
        a FIFO), or reached through a link. No filter, attribute or index flag applies. None
        where the provider cannot read from outside (the default). Never raises."""
        return None

    def lease_gpus(self, gpus: list[str]) -> None:
        """The probe phase of a GPU-sharing sweep now holds physical GPUs `gpus`
        (reb_ray.trial.phase_split). Only a provider that cannot commit (`capabilities.commit`
        False) is asked: its one sandbox carries on into the probe phase with them; one that
        commits opens a probe sandbox with the GPUs instead, and raises RebRayError here."""
        raise RebRayError(f"a {self.provider} sandbox takes GPUs only when it opens (its probe phase runs in a new one)")

    @abc.abstractmethod
    def close(self) -> None:
        """Remove the sandbox and everything in it. Idempotent; never raises for a gone sandbox."""

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
