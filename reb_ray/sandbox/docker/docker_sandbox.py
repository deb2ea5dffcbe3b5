"""The Docker sandbox provider: one container per trial, driven through the docker SDK.

Rules: an init process as PID 1 (the image's tini, so orphans are reaped and a signal ends
every process), a large /dev/shm (16 GiB default, in bytes `shm_size_bytes`; Docker's default
of 64 MB makes DataLoader workers and NCCL fail, and such a failure would be charged to the
agent), never privileged and with reduced privileges and a pids limit (`hardening_kwargs`),
labels naming sweep/trial/attempt/owner, GPUs given
as physical ids mapped to a device request (inside, devices count from 0), and the host's
CUDA_VISIBLE_DEVICES never forwarded.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import tarfile
import tempfile
import threading
import time
import uuid
from contextlib import closing
from pathlib import Path
from typing import Any, Mapping, Sequence

import docker
import requests
from docker.errors import APIError, DockerException, ImageNotFound, NotFound
from docker.types import DeviceRequest, Mount

from reb_ray.errors import ImageMissing, RebRayError
from reb_ray.sandbox.docker import outside
from reb_ray.sandbox.docker.layer_changes import container_changes
from reb_ray.sandbox.base import (
    DEFAULT_READ_LIMIT,
    EXEC_MARKER_ENV,
    KILL_GRACE_S,
    ExecResult,
    Sandbox,
    SandboxCapabilities,
    SandboxConfig,
    SandboxProcess,
    SandboxSize,
    UnreadableFile,
    killed_commands,
    to_argv,
    tree_bytes,
)
from reb_ray.sandbox.docker.docker_client import shared_client, wait_for_daemon
from reb_ray.sandbox.docker.hardening import hardening_kwargs
from reb_ray.sandbox.output import OutputCapture, OutputSink
from reb_ray.sandbox.ownership import container_labels

CONTAINER_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
_TAR_KINDS = {tarfile.SYMTYPE: "a symlink", tarfile.LNKTYPE: "a hard link", tarfile.DIRTYPE: "a directory",
              tarfile.FIFOTYPE: "a FIFO", tarfile.CHRTYPE: "a character device", tarfile.BLKTYPE: "a block device"}
_CA_ENV = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO", "NODE_EXTRA_CA_CERTS")

# Kills every process whose environment holds the marker "$1" (REB_RAY_EXEC_ID=<id>), including
# ones that left the process group with setsid; repeats until none is found.
_SWEEP_SCRIPT = r"""
me=$$
for round in 1 2 3 4 5; do
  found=
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    [ "$p" = "$me" ] && continue
    if tr '\0' '\n' < "$d/environ" 2>/dev/null | grep -qxF "$1"; then
      kill -9 "$p" 2>/dev/null && found=1
    fi
  done
  [ -z "$found" ] && exit 0
  sleep 0.05
done
"""


# Kills everything but PID 1 (the init), the processes the harness started with the container
# (its keep-alive), itself and its parent (the `timeout` of an exec with a deadline; outside
# the container's PID namespace, 0, for one without), and prints "PID<TAB>command line" for
# each process it killed (zombies, whose command line is empty, are not listed: they had
# already exited). The harness's own processes are named in `own` as "PID:STARTTIME" pairs
# recorded when the container started (`DockerSandbox.own_processes`), never by command line,
# parent or session: a process counts as the harness's only when both its PID and its start
# time (clock ticks since boot, /proc/PID/stat's 22nd field) are the recorded ones. The class
# attribute spares none (`own` empty); each sandbox's instance script names its own. Each
# round stops every process first, so none can fork, or exit on its own because its child
# died, while the round kills and lists. Shell text run inline by the script that runs it (not
# in a subshell: `$$` is the script's own PID); reb_ray.trial.between_phases runs it before
# its other steps.
KILL_LEFTOVERS_SCRIPT = r"""
keep=" 1 $$ $PPID "
own=""
for o in $own; do
  p=${o%%:*}
  if [ "$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | cut -d' ' -f20)" = "${o#*:}" ]; then
    keep="$keep$p "
  fi
done
for round in 1 2 3; do
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    case "$keep" in *" $p "*) continue ;; esac
    kill -STOP "$p" 2>/dev/null
  done
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    case "$keep" in *" $p "*) continue ;; esac
    cmd=$(tr '\0' ' ' < "$d/cmdline" 2>/dev/null)
    kill -9 "$p" 2>/dev/null && [ -n "$cmd" ] && printf '%s\t%s\n' "$p" "$cmd"
  done
done
"""


class SandboxGone(RebRayError):
    """The sandbox's container no longer exists or stopped (infrastructure, or the agent broke it)."""


def container_create_kwargs(config: SandboxConfig, name: str) -> dict[str, Any]:
    """The `containers.run` keyword arguments for `config` (pure; no daemon needed).

    GPU ids become one DeviceRequest with exactly those physical ids. The returned
    environment never holds CUDA_VISIBLE_DEVICES: the runtime numbers the assigned devices
    from 0 inside, and forwarding a host value would point at the wrong devices.
    """
    env = {k: v for k, v in config.env.items() if k != "CUDA_VISIBLE_DEVICES"}
    volumes: dict[str, dict[str, str]] = {
        str(Path(host).resolve()): {"bind": inside, "mode": "ro"} for host, inside in config.mounts.items()
    }
    volumes.update({str(Path(host).resolve()): {"bind": inside, "mode": "rw"} for host, inside in config.rw_mounts.items()})
    if config.ca_bundle is not None:
        volumes[str(Path(config.ca_bundle).resolve())] = {"bind": CONTAINER_CA_BUNDLE, "mode": "ro"}
        env.update({key: CONTAINER_CA_BUNDLE for key in _CA_ENV})
    kwargs: dict[str, Any] = {
        "image": config.image,
        "command": ["sleep", "infinity"],
        "name": name,
        "detach": True,
        "labels": container_labels(config.sweep_id, config.trial_id, config.attempt, config.labels),
        "shm_size": config.shm_size_bytes,
        "network_mode": config.network,
        "working_dir": config.workdir,
        "environment": env,
        "volumes": volumes,
        **hardening_kwargs(config.pids_limit, config.memory_bytes),
    }
    if config.propagated_mounts:
        kwargs["mounts"] = [Mount(target=inside, source=str(Path(host).resolve()), type="bind", read_only=True,
                                  propagation="rslave") for host, inside in config.propagated_mounts.items()]
    if config.gpus:
        kwargs["device_requests"] = [DeviceRequest(device_ids=list(config.gpus), capabilities=[["gpu"]])]
    if config.cpus is not None:
        kwargs["nano_cpus"] = int(config.cpus * 1e9)
    return kwargs


def binds_as_mounts(kwargs: dict[str, Any]) -> dict[str, Any]:
    """`kwargs` with its `volumes` (host path -> bind, mode) given as bind Mounts instead.

    The Docker SDK turns a `volumes` dict into both the host config's binds and the container
    config's `Volumes`, and `docker commit` copies `Volumes` into the image: a kept environment
    then declared the CA bundle file, the pip cache and the wheelhouse as volumes, and a plain
    `docker run IMAGE` failed ("cannot mount volume over existing file"). Mounts declare
    nothing in the image. A source that does not exist is made as a directory first, as a
    bind would have made it."""
    volumes = kwargs.get("volumes") or {}
    if not volumes:
        return kwargs
    mounts = []
    for host, spec in volumes.items():
        if not os.path.exists(host):
            os.makedirs(host, exist_ok=True)
        mounts.append(Mount(target=spec["bind"], source=host, type="bind", read_only=spec.get("mode") == "ro"))
    rest = {k: v for k, v in kwargs.items() if k != "volumes"}
    rest["mounts"] = mounts + list(kwargs.get("mounts") or [])
    return rest


class DockerSandbox(Sandbox):
    """A running container. Create with `DockerSandbox(config)`; always `close()` it.

    Raises ImageMissing when the image is not on the node, DockerUnavailable when the daemon
    does not answer, RebRayError when the container cannot be started (and then leaves none).
    """

    provider = "docker"
    capabilities = SandboxCapabilities(
        container_runtime="docker", image=True, mounts=True, enforces_limits=True, own_network=True,
        fixed_paths=True, host_paths=False, commit=True, filesystem_diff=True, own_processes=True,
        own_interpreters=True,
    )

    #: What `kill_leftovers` runs, for a caller that folds it into a root script of its own.
    leftovers_script = KILL_LEFTOVERS_SCRIPT
    #: The columns asked of the engine's process list (`outside.top`): Docker's default lists
    #: the cgroup with host PIDs itself.
    top_ps_args: str | None = None

    def __init__(self, config: SandboxConfig, client: docker.DockerClient | None = None) -> None:
        """Start the container of `config` on `client`'s engine (None: this process's shared
        client of the provider's engine, `shared_engine_client`); the engine's own start is
        `_start` (Docker's create and start; Podman's libpod create)."""
        if not config.image:
            raise RebRayError("sandbox config has no image")
        self.config = config
        self.workdir = config.workdir
        self._client = client or self.shared_engine_client()
        self._closed = False
        self.id: str = ""
        self._start(f"reb-ray-{uuid.uuid4().hex[:12]}")
        self._own_host_pids: frozenset[int] = frozenset()
        try:
            self._record_own_processes()
        except RebRayError:
            self.close()
            raise

    def _record_own_processes(self) -> None:
        """Record the processes the container started with (its init and keep-alive: nothing
        else runs yet), by host PID for `process_table` and by inner PID and start time for
        this sandbox's `leftovers_script`, which spares exactly those (`outside.own_at_start`)."""
        def run(script: str) -> str:
            api = self._client.api
            try:
                exec_id = api.exec_create(self.id, ["/bin/sh", "-c", script], user="root")["Id"]
                return api.exec_start(exec_id).decode(errors="replace")
            except DockerException:
                return ""

        self._own_host_pids, inner = outside.own_at_start(self._client.api, self.id, run, self.top_ps_args)
        own = " ".join(f"{pid}:{start}" for pid, start in inner)
        self.leftovers_script = KILL_LEFTOVERS_SCRIPT.replace('\nown=""\n', f'\nown="{own}"\n', 1)

    def process_table(self) -> list[SandboxProcess] | None:
        return outside.process_table(self._client.api, self.id, self._own_host_pids, self.top_ps_args)

    def blobs_outside(self, root: str, paths: list[str]) -> dict[str, str | None] | None:
        root = posixpath.join(self.workdir, root) if not root.startswith("/") else root
        return outside.blobs_outside(self._client.api, self.id, root, paths)

    @classmethod
    def shared_engine_client(cls) -> docker.DockerClient:
        """This process's client of the provider's engine, made on first use and then reused
        (DOCKER_HOST's daemon). Raises DockerUnavailable on first use without one."""
        return shared_client()

    def _start(self, name: str) -> None:
        """Create and start container `name` from `self.config`, setting `id`. Raises
        ImageMissing or RebRayError and then leaves no container."""
        config = self.config
        try:
            # create + start, not containers.run: run pulls a missing image from a registry; a
            # missing image is found by create itself, so no lookup per sandbox (one request less).
            self._container = self._client.containers.create(**binds_as_mounts(container_create_kwargs(config, name)))
            self._container.start()
        except ImageNotFound:
            self._remove_by_name(name)
            raise ImageMissing(
                f"sandbox image {config.image} is not built on this node: run `reb-ray image build`"
            ) from None
        except DockerException as exc:
            self._remove_by_name(name)
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise RebRayError(f"cannot start sandbox from {config.image}: {first[:300]}") from None
        self.id = self._container.id

    # -- the engine (class-level: asked before any sandbox opens) -----------------------------
    #: The engine's name in one-line messages (node checks, doctor).
    engine_name = "docker"
    #: Whether `reb-ray image build` builds the sandbox image on this engine (else it is copied in).
    builds_images = True

    @classmethod
    def connect_engine(cls, timeout: float = 120.0) -> docker.DockerClient:
        """A pinged client of the engine this provider's sandboxes run on (DOCKER_HOST's daemon).
        Raises DockerUnavailable with the fix."""
        from reb_ray.sandbox.docker.docker_client import connect

        return connect(timeout=timeout)

    @classmethod
    def wait_for_engine(cls) -> None:
        """Return once the daemon answers; InfraError `infra_daemon` after DAEMON_WAIT_S seconds."""
        wait_for_daemon()

    @classmethod
    def require_image(cls, client: docker.DockerClient, profile: str) -> str:
        """The profile's image tag if the engine holds it. Raises ImageMissing with the fix."""
        from reb_ray.sandbox.docker.image import require_image

        return require_image(client, profile)

    @classmethod
    def image_fix(cls, tag: str) -> str:
        """How to bring the sandbox image `tag` to this engine, in a few words."""
        return "reb-ray image build"

    @classmethod
    def start_warnings(cls) -> list[str]:
        """Lines a sweep prints at its start about what this node's engine will not do for
        these sandboxes (the Docker daemon does everything the harness asks: none)."""
        return []

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def client(self) -> docker.DockerClient:
        """The daemon client this sandbox was created with."""
        return self._client

    def stop(self) -> None:
        """SIGKILL the container's init, ending every process in it (a limit fired: the
        files stay readable with `get`, `exec` raises SandboxGone). Never raises."""
        try:
            self._client.api.kill(self.id)
        except DockerException:
            pass

    #: Whether the engine pauses the container while it commits it (Docker freezes its cgroup).
    pauses_to_commit = True

    def commit_image(self, repository: str, tag: str, changes: list[str]) -> dict:
        """Commit the container to image `repository:tag` with Dockerfile `changes` (its labels
        become the image's); returns the engine's answer ({"Id": ...}). Raises DockerException."""
        return self._client.api.commit(self.id, repository=repository, tag=tag, changes=changes,
                                       pause=self.pauses_to_commit)

    def _remove_by_name(self, name: str) -> None:
        try:
            self._client.containers.get(name).remove(force=True, v=True)
        except DockerException:
            pass

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._remove()
        except requests.exceptions.ConnectionError:
            # The engine went away (it restarted): remove the container once it answers again,
            # bounded, so no container of ours outlives its attempt.
            self.wait_for_engine()
            self._remove()

    #: Seconds `close` waits for a removal someone else started (a sweep's start-up reaper) to
    #: finish, so that no container of the attempt exists once it returns.
    OTHERS_REMOVAL_WAIT_S = 60.0

    def _remove(self) -> None:
        try:
            self._client.api.remove_container(self.id, force=True, v=True)
        except NotFound:
            pass
        except APIError as exc:
            if "already in progress" not in str(exc):
                raise
            try:  # the engine answers once the container is gone (404: gone already)
                self._client.api.wait(self.id, timeout=self.OTHERS_REMOVAL_WAIT_S, condition="removed")
            except NotFound:
                pass
            except requests.exceptions.ReadTimeout:
                raise RebRayError(f"container {self.id[:12]} still exists {self.OTHERS_REMOVAL_WAIT_S:g} s "
                                  "after another removal of it began") from None

    # -- exec --------------------------------------------------------------------------------
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
        api = self._client.api
        marker = uuid.uuid4().hex
        argv = to_argv(cmd)
        if timeout is not None:
            # GNU timeout makes itself a process-group leader and signals the whole group.
            argv = ["timeout", "-k", f"{KILL_GRACE_S:g}", f"{max(timeout, 0.001):.3f}", *argv]
        environment = {**(env or {}), EXEC_MARKER_ENV: marker}
        try:
            exec_id = api.exec_create(
                self.id, argv, environment=environment, workdir=workdir or self.workdir, user=user or ""
            )["Id"]
            start = time.monotonic()
            stream = api.exec_start(exec_id, stream=True, demux=False)
        except NotFound:
            raise SandboxGone(f"sandbox {self.id[:12]} is gone") from None
        except APIError as exc:
            raise SandboxGone(f"sandbox {self.id[:12]} cannot run commands: {exc.explanation}") from None

        out = OutputCapture(self.config.head_bytes, self.config.tail_bytes, watch, sink)
        reader = threading.Thread(target=_drain, args=(stream, out), daemon=True)
        reader.start()
        hard_deadline = None if timeout is None else start + timeout + KILL_GRACE_S + 10.0
        forced = False
        poll = 0.01
        while True:
            reader.join(poll)
            inspected = api.exec_inspect(exec_id)
            if not inspected["Running"]:
                # A background child may still hold the stream open: drain what is in flight, then stop.
                out.wait_for_reader(reader)
                break
            if hard_deadline is not None and time.monotonic() > hard_deadline:
                forced = True  # the in-container deadline did not work (coreutils broken?)
                self._kill_marked(marker)
                break
            poll = min(poll * 2, 0.25)
        duration = time.monotonic() - start
        stream.close()
        # The inspect that saw it end holds its exit code: no second round trip per exec.
        exit_code = None if forced else inspected["ExitCode"]
        timed_out = forced or (
            timeout is not None and exit_code in (124, 137) and duration >= timeout * 0.98
        )
        if timed_out:
            self._kill_marked(marker)
        return ExecResult(
            exit_code=None if forced else exit_code,
            timed_out=timed_out,
            duration_s=duration,
            **out.finish(),
        )

    def kill_leftovers(self) -> list[str] | None:
        try:
            api = self._client.api
            exec_id = api.exec_create(self.id, ["/bin/sh", "-c", self.leftovers_script + "exit 0\n"], user="root")["Id"]
            out = api.exec_start(exec_id)
        except DockerException:
            return None
        return killed_commands(out.decode(errors="replace"))

    def _kill_marked(self, marker: str) -> None:
        """Kill every process of one exec, including setsid'd descendants."""
        try:
            api = self._client.api
            exec_id = api.exec_create(self.id, ["/bin/sh", "-c", _SWEEP_SCRIPT, "sweep", f"{EXEC_MARKER_ENV}={marker}"], user="root")["Id"]
            api.exec_start(exec_id)
        except DockerException:
            pass

    # -- files -------------------------------------------------------------------------------
    def put(self, src: Path | str, dest: str) -> None:
        src = Path(src)
        if not src.exists():
            raise FileNotFoundError(f"{src} does not exist")
        dest = posixpath.join(self.workdir, dest) if not dest.startswith("/") else dest
        parent = posixpath.dirname(dest.rstrip("/")) or "/"
        with tempfile.TemporaryFile() as buf:
            with tarfile.open(fileobj=buf, mode="w") as tar:
                tar.add(str(src), arcname=posixpath.basename(dest.rstrip("/")))
            self._put_archive(buf, parent)

    def put_tar(self, archive: Path, dest_dir: str) -> None:
        with Path(archive).open("rb") as f:
            self._put_archive(f, dest_dir, archive)

    def _put_archive(self, archive: Any, directory: str, name: Path | None = None) -> None:
        """Unpack the tar stream `archive` (a seekable file) into sandbox `directory`, made
        first with `mkdir -p` (one exec) unless it is the workdir (Docker made it) or `/`: that
        exec was a tenth of a second of each trial's repository copy. A workdir that
        is gone after all (the agent removed it) is made then, and the archive sent again; a
        missing directory is never found out by sending a large archive twice."""
        assumed = directory.rstrip("/") in ("", self.workdir.rstrip("/"))
        if not assumed:
            self._must(["mkdir", "-p", directory])
        for attempt in range(2):
            archive.seek(0)
            try:
                accepted = self._client.api.put_archive(self.id, directory, archive)
            except (NotFound, APIError) as exc:
                if attempt or not assumed or not _missing_directory(exc):
                    if isinstance(exc, NotFound):
                        raise SandboxGone(f"sandbox {self.id[:12]} is gone") from None
                    raise RebRayError(f"sandbox {self.id[:12]}: cannot unpack into {directory}: {exc.explanation}") from None
                self._must(["mkdir", "-p", directory])  # raises SandboxGone when the sandbox is
                continue
            if not accepted:
                raise RebRayError(f"sandbox {self.id[:12]}: the daemon refused the archive {name or '(tar)'}")
            return

    def get(self, src: str, dest: Path | str) -> None:
        dest = Path(dest)
        src = posixpath.join(self.workdir, src) if not src.startswith("/") else src
        try:
            chunks, _stat = self._client.api.get_archive(self.id, src)
        except NotFound:
            raise FileNotFoundError(f"{src} not found in sandbox {self.id[:12]}") from None
        with tempfile.TemporaryDirectory() as tmp:
            archive = Path(tmp) / "a.tar"
            with archive.open("wb") as f:
                for chunk in chunks:
                    f.write(chunk)
            unpacked = Path(tmp) / "x"
            with tarfile.open(archive) as tar:
                tar.extractall(unpacked, filter="data")
            (entry,) = list(unpacked.iterdir())
            if dest.exists() and dest.is_dir() and entry.is_dir():
                shutil.rmtree(dest)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(entry), str(dest))

    def read_bytes(self, src: str, limit: int = DEFAULT_READ_LIMIT) -> bytes:
        src = posixpath.join(self.workdir, src) if not src.startswith("/") else src
        api = self._client.api
        try:
            # The archive endpoint streams a tar of the path itself (a symlink stays a link);
            # the response is read as a stream and closed, so a huge file or directory costs
            # one tar header, never its contents.
            res = api._get(api._url("/containers/{0}/archive", self.id), params={"path": src}, stream=True,
                           headers={"Accept-Encoding": "identity"})
            api._raise_for_status(res)
        except NotFound:
            raise FileNotFoundError(f"{src} not found in sandbox {self.id[:12]}") from None
        except DockerException as exc:
            raise RebRayError(f"sandbox {self.id[:12]}: cannot read {src}: {exc}") from exc
        with closing(res):
            if _stat_is_symlink(res.headers):  # Podman's archive follows a link: its stat does not
                raise UnreadableFile(f"{src}: a symlink, not a regular file")
            res.raw.decode_content = True  # a daemon that gzips anyway is still read as a tar
            try:
                with tarfile.open(fileobj=res.raw, mode="r|") as tar:
                    member = tar.next()
                    if member is None or not member.isreg():
                        kind = "nothing" if member is None else _TAR_KINDS.get(member.type, "not a regular file")
                        raise UnreadableFile(f"{src}: {kind}, not a regular file")
                    if member.size > limit:
                        raise UnreadableFile(f"{src}: {member.size} bytes, over the {limit}-byte limit")
                    return tar.extractfile(member).read()
            except tarfile.TarError as exc:
                raise RebRayError(f"sandbox {self.id[:12]}: unreadable archive of {src}: {exc}") from exc

    def _must(self, argv: list[str]) -> None:
        result = self.exec(argv, timeout=60, workdir="/")  # also when the agent removed the workdir
        if not result.ok:
            raise RebRayError(f"sandbox {self.id[:12]}: {' '.join(argv)} failed: {result.output.strip()[:200]}")

    # -- size --------------------------------------------------------------------------------
    def filesystem_changes(self) -> list[dict] | None:
        """What `docker diff` lists, read from the container's overlay layers on this host where
        it can (a second of the daemon's CPU saved per call), from the daemon otherwise."""
        return container_changes(self._client, self.id)

    def size(self, timeout: float = 60.0) -> SandboxSize:
        """Writable-layer bytes from the daemon (`SizeRw`); after `timeout` seconds (0: at once),
        or if the daemon does not report it, the host walks the overlay upper directory instead."""
        box: dict[str, int | None] = {}

        def ask_daemon() -> None:
            try:
                rows = self._client.api.containers(all=True, size=True, filters={"id": self.id})
                box["bytes"] = rows[0].get("SizeRw") if rows else None
            except DockerException:
                box["bytes"] = None

        if timeout > 0:  # timeout 0: go straight to the fallback
            worker = threading.Thread(target=ask_daemon, daemon=True)
            worker.start()
            worker.join(timeout)
        if box.get("bytes") is not None:
            return SandboxSize(bytes=box["bytes"], method="docker_size_rw")
        try:
            upper = self._client.api.inspect_container(self.id)["GraphDriver"]["Data"]["UpperDir"]
        except (DockerException, KeyError, TypeError):
            upper = None
        if upper and os.path.isdir(upper):
            return SandboxSize(bytes=tree_bytes(Path(upper)), method="upperdir_walk")
        return SandboxSize(bytes=None, method="unavailable")


#: Go's os.ModeSymlink, in the file mode of the engine's path stat (X-Docker-Container-Path-Stat).
_GO_MODE_SYMLINK = 1 << 27


def _stat_is_symlink(headers: Mapping[str, str]) -> bool:
    """True when the archive answer's path stat (base64 JSON, Docker's and Podman's header)
    says the path is a symlink. Docker's tar then holds the link itself, Podman's the file it
    points to; the stat is the same on both, so it is what decides."""
    import base64
    import json

    raw = headers.get("X-Docker-Container-Path-Stat")
    if not raw:
        return False
    try:
        mode = int(json.loads(base64.b64decode(raw)).get("mode", 0))
    except (ValueError, TypeError, AttributeError):
        return False
    return bool(mode & _GO_MODE_SYMLINK)


def _missing_directory(exc: DockerException) -> bool:
    """The daemon's answer to an archive put into a directory that is not there (or not a
    directory), as against a container that is gone."""
    text = str(getattr(exc, "explanation", "") or exc).lower()
    return "no such container" not in text


def _drain(stream: Any, out: OutputCapture) -> None:
    try:
        for chunk in stream:
            out.feed(chunk)
    except Exception:  # the socket was closed under us: the exec is over
        pass
