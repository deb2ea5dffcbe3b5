"""The Podman sandbox provider: one container per trial on a Podman engine, rootful or rootless.

Podman serves the Docker API (`podman system service`), so this provider is the Docker one
(`DockerSandbox`: exec, files, size, stop, close are the same requests) with three changes:

- The engine is reached on Podman's socket, never Docker's: the first of the sweep's
  `podman_socket` setting, `REB_RAY_PODMAN_SOCKET`, `CONTAINER_HOST` (Podman's own variable),
  the calling user's rootless socket `$XDG_RUNTIME_DIR/podman/podman.sock`, and the rootful
  `/run/podman/podman.sock` (`podman_socket`).
- A container is created through Podman's own endpoint (`/libpod/containers/create`), because
  its Docker-compatible one drops CDI devices: GPUs are given as CDI names,
  `nvidia.com/gpu=<id>` for each physical id (a CDI spec written by the NVIDIA container
  toolkit, `nvidia-ctk cdi generate`), and inside the devices count from 0 as under Docker.
- A rootless engine on cgroup v1 (or on v2 without delegated controllers) silently drops
  memory, pids and CPU limits. After start the provider reads the limits back from the engine
  and records what holds (`limits_enforced`); a sandbox whose limits are not enforced says so
  in its capabilities (`enforces_limits` False), so the trials row records it and no limit
  watch pretends to guard it.

Networks: the host guard and the egress proxy work on a Docker network of the node; a rootless
engine's networks live in the user's namespace, where neither can be installed. Podman
sandboxes therefore share the node's network (Podman's `host` mode, as the local provider
does; `none` stays `none`), the LLM proxy is reached on loopback, and a sweep refuses the
`registries` policy on this provider (its capabilities say `own_network` False).
"""

from __future__ import annotations

import grp
import os
import pwd
import re
import shlex
import stat
import threading
import time
from contextlib import closing
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import docker
import requests
from docker.errors import DockerException

from reb_ray.errors import DockerUnavailable, ImageMissing, InfraError, RebRayError
from reb_ray.sandbox.base import SandboxCapabilities, SandboxConfig
from reb_ray.sandbox.docker.docker_sandbox import DockerSandbox, container_create_kwargs

#: The variable naming the Podman socket for reb-ray (a path or a unix:// URL).
SOCKET_ENV = "REB_RAY_PODMAN_SOCKET"
#: Podman's own variable for its service, read after reb-ray's.
CONTAINER_HOST_ENV = "CONTAINER_HOST"
#: The socket of a rootful Podman service (`systemctl start podman.socket`).
ROOTFUL_SOCKET = "/run/podman/podman.sock"
#: The CDI vendor/class of NVIDIA GPUs (`nvidia-ctk cdi generate` names them nvidia.com/gpu=<index|UUID>).
GPU_CDI_KIND = "nvidia.com/gpu"
#: The variable that names another CDI kind for a node's GPUs (another vendor's, e.g. amd.com/gpu).
CDI_KIND_ENV = "REB_RAY_CDI_GPU_KIND"



def runtime_dir(uid: int | None = None) -> str:
    """Podman's rootless runtime directory of `uid` (default: this process's user), by Podman's
    own rule: `$XDG_RUNTIME_DIR` (this user's only), else `/run/user/<uid>` where it exists and
    is that user's, else `$TMPDIR/podman-run-<uid>` (Podman makes it). A login without a
    systemd session (su, runuser, a batch job) has no `/run/user/<uid>`: the fix must not name it."""
    uid = os.getuid() if uid is None else uid
    if uid == os.getuid() and os.environ.get("XDG_RUNTIME_DIR"):
        return os.environ["XDG_RUNTIME_DIR"]
    try:
        if os.stat(f"/run/user/{uid}").st_uid == uid:
            return f"/run/user/{uid}"
    except OSError:
        pass
    return f"{os.environ.get('TMPDIR') or '/tmp'}/podman-run-{uid}"


def rootless_socket(uid: int | None = None) -> str:
    """The rootless Podman socket of `uid` (default: this user): `<runtime_dir>/podman/podman.sock`,
    where `podman system service` without an address listens."""
    return f"{runtime_dir(uid)}/podman/podman.sock"


def socket_uid(path: str) -> int:
    """The user whose service a socket path belongs to: the uid in a `podman-run-<uid>` or
    `/run/user/<uid>` component, else the owner of the socket (or of its nearest existing
    parent), else this process's user."""
    match = re.search(r"(?:podman-run-|/run/user/)(\d+)(?:/|$)", path)
    if match:
        return int(match.group(1))
    here = Path(path)
    while True:
        try:
            owner = here.stat().st_uid
            return owner if owner != 0 or here == Path(path) else os.getuid()
        except OSError:
            if here.parent == here:
                return os.getuid()
            here = here.parent


def as_user(command: str, uid: int) -> str:
    """`command` as one shell line run by `uid`: as it is when this process is that user, else
    through `runuser -l NAME -c '...'` (a root shell; a login environment, so Podman finds that
    user's own runtime directory and configuration)."""
    if uid == os.getuid():
        return command
    return f"runuser -l {_user_name(uid)} -c {shlex.quote(command)}"


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _home(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_dir
    except KeyError:
        return os.path.expanduser("~")


def start_command(path: str, uid: int) -> str:
    """The shell line that starts `uid`'s Podman API service on the socket `path`, detached
    (`setsid -f`: it outlives the shell that started it), its log next to the socket."""
    parent = str(Path(path).parent)
    return as_user(f"mkdir -p {parent} && setsid -f podman system service --time=0 unix://{path} "
                   f">>{parent}/service.log 2>&1", uid)


def how_to_start(url: str | None = None) -> str:
    """The fix for a missing Podman service: one shell line to run as printed (a trailing `#`
    comment explains it). For an explicit unix socket (`url`) that user's service on it (from
    a root shell through `runuser`); with none, this user's rootless service on Podman's own
    default path, or as root a rootful one on ROOTFUL_SOCKET (found without any setting)."""
    explicit = url if url is not None else next((u for o, u in socket_candidates() if "default" not in o), None)
    if explicit is not None and not explicit.startswith("unix://"):
        return f"start the Podman service that listens on {explicit} (a remote service is started where it runs)"
    if explicit is not None:
        path = explicit.removeprefix("unix://")
        uid = socket_uid(path)
        pointed = os.environ.get(SOCKET_ENV) or os.environ.get(CONTAINER_HOST_ENV)
        export = "" if pointed and _as_url(pointed) == explicit else f" && export {SOCKET_ENV}={path}"
        return f"{start_command(path, uid)}{export}  # {_user_name(uid)}'s Podman service on {path}"
    if os.geteuid() == 0:
        return (f"mkdir -p {Path(ROOTFUL_SOCKET).parent} && setsid -f podman system service --time=0 unix://{ROOTFUL_SOCKET} "
                f">>{Path(ROOTFUL_SOCKET).parent}/service.log 2>&1  # a rootful service; for a user's rootless one, "
                f"export {SOCKET_ENV}=<its socket> first (`podman info --format '{{{{.Host.RemoteSocket.Path}}}}'` as that user)")
    path = rootless_socket()
    return f"{start_command(path, os.getuid())}  # this user's rootless Podman service on {path}"


def service_pids(path: str) -> list[int]:
    """Pids of the `podman system service` processes listening on the unix socket `path` (the
    service and its re-executed child in the user namespace), read from /proc; [] if none."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [a.decode(errors="replace") for a in argv if a]
        if words[:1] and words[0].endswith("podman") and "service" in words and f"unix://{path}" in words:
            found.append(int(proc.name))
    return sorted(found)


def stop_command(path: str, uid: int) -> str:
    """The start of a shell line that stops `uid`'s service on `path`, whoever started it, and
    waits until it is gone: SIGTERM to the processes of that user whose command line is that
    service's (the service passes the signal to its child in the user namespace); nothing
    when none runs. Looked up when the line runs, so fixes printed together run in order."""
    pattern = shlex.quote(f"podman system service .*unix://{path}")
    user = _user_name(uid)
    return (f"pkill -u {user} -f {pattern}; while pgrep -u {user} -f {pattern} >/dev/null; do sleep 0.2; done; ")


#: containers.conf for a rootless service reb-ray runs sandboxes on: rlimits at most a node's
#: usual hard limits (Podman's default nofile of 1048576 above them fails every start), runc and
#: the cgroupfs manager (crun refuses a hybrid cgroup layout; the systemd manager needs a user
#: session), and an exec session's conmon kept 10 s after its exec instead of 300 s (reb-ray
#: reads an exec's exit code as soon as its output ends; with 300 s a sweep leaves a conmon
#: per exec for five minutes, after the service has stopped too).
CONTAINERS_CONF = """[containers]
default_ulimits = ["nofile=1024:{nofile}", "nproc=4096:{nproc}"]
[engine]
cgroup_manager = "cgroupfs"
runtime = "runc"
events_logger = "file"
exit_command_delay = {delay}
"""
#: Seconds an exec session's conmon waits after its exec (containers.conf `exit_command_delay`).
EXEC_CLEANUP_DELAY_S = 10
#: storage.conf for a rootless service: overlay through fuse-overlayfs (vfs copies the whole
#: image at every start: 16-22 s instead of 0.3 s), runroot and graphroot spelled out (on a fresh
#: store Podman 4.3's commit over the API fails with "runroot must be set" without them).
STORAGE_CONF = """[storage]
driver = "overlay"
runroot = "{runroot}"
graphroot = "{graphroot}"
[storage.options.overlay]
mount_program = "/usr/bin/fuse-overlayfs"
"""


def containers_conf() -> str:
    """CONTAINERS_CONF with this node's hard limits of open files and processes (capped at
    Podman's own defaults: 1048576 and 4096)."""
    import resource

    def hard(limit: int, cap: int) -> int:
        value = resource.getrlimit(limit)[1]
        return cap if value == resource.RLIM_INFINITY else min(value, cap)

    return CONTAINERS_CONF.format(nofile=hard(resource.RLIMIT_NOFILE, 1048576), nproc=max(1024, hard(resource.RLIMIT_NPROC, 4096)),
                                  delay=EXEC_CLEANUP_DELAY_S)


def storage_conf(uid: int) -> str:
    """STORAGE_CONF for `uid`, its runroot under Podman's runtime directory for that user."""
    return STORAGE_CONF.format(runroot=f"{runtime_dir(uid)}/containers",
                               graphroot=f"{_home(uid)}/.local/share/containers/storage")


def _write(text: str, path: str) -> str:
    """A shell command writing `text` to `path` (its directory made), by printf with the text in
    double quotes (no single quote inside, so `as_user` quotes it plainly)."""
    body = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("$", "\\$")
    return f'mkdir -p {Path(path).parent} && printf "{body}" > {path}'


def storage_fix(path: str, uid: int) -> str:
    """One shell line that gives `uid`'s service on `path` the overlay store: stop the service,
    reset the store with the old storage.conf out of the way (a store made by vfs refuses a
    reset under overlay options: "vfs driver does not support overlay.mount_program options"),
    write storage.conf, start the service again. The store's images are gone after it."""
    conf = f"{_home(uid)}/.config/containers/storage.conf"
    body = (f"rm -f {conf} && podman system reset -f >/dev/null && {_write(storage_conf(uid), conf)} && "
            f"mkdir -p {Path(path).parent} && setsid -f podman system service --time=0 unix://{path} "
            f">>{Path(path).parent}/service.log 2>&1")
    return f"{stop_command(path, uid)}{as_user(body, uid)}  # overlay via fuse-overlayfs in {conf} (the store is reset: load the image after)"


def containers_fix(path: str, uid: int) -> str:
    """One shell line that writes `uid`'s containers.conf (CONTAINERS_CONF) and restarts its
    service on `path`."""
    conf = f"{_home(uid)}/.config/containers/containers.conf"
    body = (f"{_write(containers_conf(), conf)} && mkdir -p {Path(path).parent} && setsid -f podman system service "
            f"--time=0 unix://{path} >>{Path(path).parent}/service.log 2>&1")
    return f"{stop_command(path, uid)}{as_user(body, uid)}  # rlimits under the node's hard limits, runc, cgroupfs in {conf}"


def subuid_fix(uid: int) -> str:
    """One shell line (as root) giving `uid` 65536 subordinate uids and gids after every range
    already given, then `podman system migrate` as that user."""
    start = 100000
    for table in ("/etc/subuid", "/etc/subgid"):
        try:
            for line in Path(table).read_text().splitlines():
                parts = line.split(":")
                if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
                    start = max(start, int(parts[1]) + int(parts[2]))
        except OSError:
            pass
    grant = f"usermod --add-subuids {start}-{start + 65535} --add-subgids {start}-{start + 65535} {_user_name(uid)}"
    prefix = "" if os.geteuid() == 0 else "sudo "
    return f"{prefix}{grant} && {as_user('podman system migrate', uid)}  # restart the service after"


def unreachable(path: Path, uid: int) -> Path | None:
    """The first directory on the way to `path` (or `path` itself) that user `uid` cannot pass
    or read by its mode bits (owner, group, other; root passes everything), or None. A path
    that does not exist yet is judged by its nearest existing parent."""
    if uid == 0:
        return None
    try:
        entry = pwd.getpwuid(uid)
        gids = {entry.pw_gid, *(g.gr_gid for g in grp.getgrall() if entry.pw_name in g.gr_mem)}
    except KeyError:
        gids = set()
    path = Path(os.path.abspath(path))
    chain = [*reversed(path.parents), path]
    for i, part in enumerate(chain):
        try:
            st = part.stat()
        except OSError:
            return None  # not there yet: what exists on the way was passable
        need = 0o5 if i == len(chain) - 1 and part.is_dir() else (0o4 if i == len(chain) - 1 else 0o1)
        bits = (st.st_mode >> 6) & 7 if st.st_uid == uid else (st.st_mode >> 3) & 7 if st.st_gid in gids else st.st_mode & 7
        if bits & need != need:
            return part
    return None


def bind_sources(settings: Any, toolchains: Path | None) -> list[Path]:
    """The host paths a sweep with sandbox `settings` (SandboxSettings) bind-mounts into podman
    sandboxes by default: the node's wheel cache (when shared), the wheelhouses, the CA bundle,
    and `toolchains` (the agent toolchains' root, where LLM agents' slots are made)."""
    paths = [Path(settings.pip_cache_dir)] if settings.pip_cache else []
    paths += [Path(w) for w in settings.wheelhouses]
    paths += [Path(settings.ca_bundle)] if settings.ca_bundle else []
    return paths + ([toolchains] if toolchains is not None else [])


def blocked_binds(paths: list[Path], uid: int) -> dict[str, Path]:
    """{path: the directory that stops it} for each of `paths` that user `uid` cannot reach."""
    return {str(p): stop for p in paths if (stop := unreachable(p, uid)) is not None}


#: Where the fix for unreachable bind sources puts reb-ray's node cache (wheels, toolchains).
SHARED_CACHE = "/var/cache/reb-ray"


def mount_fix(blocked: dict[str, Path], uid: int) -> str:
    """One shell line for bind sources the service's user `uid` cannot reach (`blocked`): a
    cache directory that user owns, outside any private home, named by REB_RAY_CACHE_DIR (the
    wheel cache and the toolchains follow it; the venv stays where it is)."""
    name = _user_name(uid)
    return (f"install -d -o {name} {SHARED_CACHE} {SHARED_CACHE}/wheels && export REB_RAY_CACHE_DIR={SHARED_CACHE}"
            f"  # {name} runs the sandboxes and cannot reach {', '.join(blocked)}; toolchains: "
            "`reb-ray agents install` again")


def check_bind_sources(client: docker.DockerClient, paths: list[Path]) -> None:
    """Raise RebRayError, in one line naming the first path and the fix, when the rootless
    service behind `client` runs as a user who cannot reach one of `paths` (each sandbox would
    fail to start with "statfs: permission denied"). Nothing for a rootful service."""
    facts = engine(client)
    if not facts.rootless or facts.uid is None:
        return
    blocked = blocked_binds(paths, facts.uid)
    if blocked:
        path, stop = next(iter(blocked.items()))
        raise RebRayError(f"the Podman service's user {_user_name(facts.uid)} cannot reach {path} ({stop} is mode "
                          f"{oct(stop.stat().st_mode & 0o777)}), which sandboxes mount: {mount_fix(blocked, facts.uid)}")


#: Capabilities of a Podman sandbox before its engine is asked (`capabilities_of("podman")`):
#: limits not assumed enforced (a rootless engine on cgroup v1 drops them); each sandbox
#: replaces this with what its engine really enforces (`PodmanSandbox.capabilities`).
PODMAN_CAPABILITIES = SandboxCapabilities(
    container_runtime="podman", image=True, mounts=True, enforces_limits=False, own_network=False,
    fixed_paths=True, host_paths=False, commit=True, filesystem_diff=True, own_processes=True,
    own_interpreters=True,
)


def _as_url(value: str) -> str:
    """A socket path or URL as a docker-SDK base URL (unix:// or tcp://). Raises RebRayError
    for a scheme the SDK cannot reach (Podman's ssh:// connections need its own client)."""
    value = value.strip()
    if value.startswith("/"):
        return f"unix://{value}"
    if value.startswith(("unix://", "tcp://", "http://")):
        return value
    raise RebRayError(f"Podman socket {value!r}: give a path or a unix:// or tcp:// URL (ssh:// is not supported)")


def socket_candidates(setting: str | None = None) -> list[tuple[str, str]]:
    """(where it came from, URL) of each place a Podman socket may be, in the order asked: an
    explicit setting, REB_RAY_PODMAN_SOCKET, CONTAINER_HOST, the rootless socket of this user,
    the rootful one."""
    found: list[tuple[str, str]] = []
    if setting:
        found.append(("setting podman_socket", _as_url(setting)))
    for name in (SOCKET_ENV, CONTAINER_HOST_ENV):
        if os.environ.get(name):
            found.append((name, _as_url(os.environ[name])))
    found.append(("rootless default", f"unix://{rootless_socket()}"))
    found.append(("rootful default", f"unix://{ROOTFUL_SOCKET}"))
    return found


def podman_socket(setting: str | None = None) -> str:
    """The URL of the Podman service to use: the first explicit one (setting, then the two
    variables) as given, else the first default socket that exists. Raises DockerUnavailable
    naming every place looked at when none is given and none exists."""
    candidates = socket_candidates(setting)
    explicit = [url for origin, url in candidates if "default" not in origin]
    if explicit:
        return explicit[0]
    for _origin, url in candidates:
        if Path(url.removeprefix("unix://")).exists():
            return url
    looked = ", ".join(url.removeprefix("unix://") for _o, url in candidates)
    raise DockerUnavailable(f"no Podman socket ({looked} do not exist): {how_to_start()}")


def connect(timeout: float = 120.0, setting: str | None = None) -> docker.DockerClient:
    """A docker-SDK client of the Podman service (`podman_socket`), pinged once. `timeout` is
    the per-request timeout in seconds. Raises DockerUnavailable when it does not answer."""
    url = podman_socket(setting)
    try:
        client = docker.DockerClient(base_url=url, timeout=int(timeout))
        client.ping()
    except (DockerException, requests.exceptions.RequestException) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DockerUnavailable(f"Podman service at {url} not reachable ({reason[:160]}): {how_to_start(url)}") from None
    return client


_SHARED: dict[str, docker.DockerClient] = {}
_SHARED_LOCK = threading.Lock()


def shared_client() -> docker.DockerClient:
    """This process's client of the Podman service, made by `connect` on first use and then
    reused (one per socket). Raises DockerUnavailable on first use without a service."""
    url = podman_socket()
    with _SHARED_LOCK:
        if url not in _SHARED:
            _SHARED[url] = connect()
        return _SHARED[url]


def wait_for_daemon(timeout_s: float = 90.0) -> None:
    """Return as soon as the Podman service answers a ping on a new connection; raises
    InfraError `infra_daemon` when it has not answered for `timeout_s` seconds (a restarting
    user service is waited for, not failed)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with closing(docker.DockerClient(base_url=podman_socket(), timeout=10)) as client:
                client.ping()
            return
        except (DockerException, requests.exceptions.RequestException, RebRayError) as exc:
            if time.monotonic() >= deadline:
                reason = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
                raise InfraError("infra_daemon", f"Podman service did not answer for {timeout_s:g} s ({reason})") from None
        time.sleep(0.5)


@dataclass(frozen=True)
class PodmanEngine:
    """What a Podman service says about itself (`/libpod/info`), as the provider needs it.

    `controllers` are the cgroup controllers its containers may use (empty on a rootless
    cgroup v1 engine: no memory, pids or cpu limit can be set).
    """

    version: str
    rootless: bool
    cgroup_version: str  # "v1" | "v2"
    cgroup_manager: str  # "cgroupfs" | "systemd"
    controllers: tuple[str, ...]
    graph_driver: str
    runtime: str
    uid_ranges: int = 0  # subordinate ids mapped into the user namespace (rootless), beyond the user's own
    uid: int | None = None  # the host user the service runs as (rootless: its namespace's root); None: unknown
    notes: list[str] = field(default_factory=list)

    @property
    def enforces_limits(self) -> bool:
        """True when memory, pids and cpu limits take effect: rootful, or rootless with those
        controllers delegated (cgroup v2)."""
        if not self.rootless:
            return True
        return {"memory", "pids", "cpu"} <= set(self.controllers)


def engine(client: docker.DockerClient) -> PodmanEngine:
    """Ask the Podman service for `PodmanEngine`. Raises DockerUnavailable when it does not
    answer or is not Podman (a Docker daemon has no /libpod endpoints)."""
    api = client.api
    try:
        info = api._result(api._get(api._url("/libpod/info")), True)
    except (DockerException, requests.exceptions.RequestException, ValueError) as exc:
        raise DockerUnavailable(f"the service at {api.base_url} is not a Podman service ({str(exc)[:160]})") from None
    host, store = info.get("host", {}), info.get("store", {})
    security = host.get("security", {})
    uidmap = (host.get("idMappings") or {}).get("uidmap") or []
    return PodmanEngine(
        version=(info.get("version") or {}).get("Version", ""),
        rootless=bool(security.get("rootless")),
        cgroup_version=host.get("cgroupVersion", ""),
        cgroup_manager=host.get("cgroupManager", ""),
        controllers=tuple(host.get("cgroupControllers") or ()),
        graph_driver=store.get("graphDriverName", ""),
        runtime=(host.get("ociRuntime") or {}).get("name", ""),
        uid_ranges=sum(int(m.get("size", 0)) for m in uidmap if m.get("container_id", 0) != 0),
        uid=next((int(m["host_id"]) for m in uidmap if m.get("container_id") == 0 and "host_id" in m), None)
        if security.get("rootless") else 0,
    )


def image_fix(tag: str, profile: str) -> str:
    """How to bring the sandbox image `tag` into a Podman store, in one line."""
    return (f"build it where Docker runs (`reb-ray image build --profile {profile}`), then as the Podman user "
            f"`docker save {tag} | podman load` (or `reb-ray image build --sandbox podman` on a node with both)")


def gpu_devices(gpus: list[str]) -> list[dict[str, str]]:
    """CDI device entries of the libpod create spec for physical GPU ids (indices or UUIDs):
    `<kind>=<id>`, the kind GPU_CDI_KIND unless REB_RAY_CDI_GPU_KIND names another."""
    kind = os.environ.get(CDI_KIND_ENV) or GPU_CDI_KIND
    return [{"path": f"{kind}={gpu}"} for gpu in gpus]


def libpod_spec(config: SandboxConfig, name: str) -> dict[str, Any]:
    """The `/libpod/containers/create` body for `config` (pure; no engine needed).

    Everything the Docker provider sets is set the same way (labels, workdir, environment
    without CUDA_VISIBLE_DEVICES, read-only and writable binds, rslave toolchain mounts,
    /dev/shm size, the hardening: no new privileges, capabilities dropped but the package
    managers' ones, the pids and memory limits, CPUs), built from `container_create_kwargs` so
    both providers follow one rule; GPUs are CDI devices; the network is the node's (`host`)
    unless the config says `none`.
    """
    kw = container_create_kwargs(config.model_copy(update={"gpus": []}), name)
    mounts = [{"destination": spec["bind"], "source": host, "type": "bind",
               "options": ["rbind", "ro" if spec["mode"] == "ro" else "rw"]}
              for host, spec in kw["volumes"].items()]
    mounts += [{"destination": m["Target"], "source": m["Source"], "type": "bind", "options": ["rbind", "ro", "rslave"]}
               for m in kw.get("mounts", [])]
    limits: dict[str, Any] = {}
    if kw.get("mem_limit") is not None:
        limits["memory"] = {"limit": kw["mem_limit"], "swap": kw["memswap_limit"]}
    if kw.get("pids_limit") is not None:
        limits["pids"] = {"limit": kw["pids_limit"]}
    if kw.get("nano_cpus") is not None:
        limits["cpu"] = {"quota": kw["nano_cpus"] // 10_000, "period": 100_000}
    spec: dict[str, Any] = {
        "name": name,
        "image": kw["image"],
        "command": kw["command"],
        "labels": kw["labels"],
        "env": kw["environment"],
        "work_dir": kw["working_dir"],
        "shm_size": kw["shm_size"],
        "mounts": mounts,
        "privileged": kw["privileged"],
        "no_new_privileges": "no-new-privileges" in kw["security_opt"],
        "cap_drop": kw["cap_drop"],
        "cap_add": kw["cap_add"],
        "netns": {"nsmode": "none" if config.network == "none" else "host"},
        "devices": gpu_devices(list(config.gpus)),
    }
    if limits:
        spec["resource_limits"] = limits
    return spec


class PodmanSandbox(DockerSandbox):
    """A running Podman container. Create with `PodmanSandbox(config)`; always `close()` it.

    `limits_enforced` says whether the engine applied the config's memory, pids and CPU
    limits (read back after start); `capabilities.enforces_limits` follows it. Raises
    ImageMissing when the image is not in the engine's store, DockerUnavailable when the
    service does not answer, RebRayError when the container cannot be started (and then
    leaves none).
    """

    provider = "podman"
    capabilities = PODMAN_CAPABILITIES
    engine_name = "podman"
    builds_images = False  # reb-ray builds with Docker; the image is copied in (`transfer_image`)
    # Podman's `top` with ps(1) options (the API's default, -ef) runs the container's own `ps`,
    # which the agent may have replaced; with these descriptors Podman reads /proc itself, and
    # HPID is the host PID.
    top_ps_args = "hpid,ppid,args"

    @classmethod
    def connect_engine(cls, timeout: float = 120.0) -> docker.DockerClient:
        """A pinged client of the Podman service (`podman_socket`). Raises DockerUnavailable
        naming the socket and how to start the service."""
        return connect(timeout=timeout)

    @classmethod
    def wait_for_engine(cls) -> None:
        wait_for_daemon()

    @classmethod
    def require_image(cls, client: docker.DockerClient, profile: str) -> str:
        """The profile's image tag if the Podman store holds it. Raises ImageMissing saying how
        to bring it there (Podman builds no image of reb-ray's: it is copied from Docker)."""
        from reb_ray.sandbox.docker.image import image_tag, require_image

        try:
            return require_image(client, profile)
        except ImageMissing:
            tag = image_tag(profile)
            raise ImageMissing(f"sandbox image {tag} is not in the Podman store at {podman_socket()}: "
                               f"{image_fix(tag, profile)}") from None

    @classmethod
    def image_fix(cls, tag: str) -> str:
        return f"not in the Podman store: {image_fix(tag, tag.rsplit(':', 1)[-1].split('-')[0])}"

    @classmethod
    def start_warnings(cls) -> list[str]:
        """What a sweep on this node's Podman engine does not get: limits a rootless engine
        drops, and the host guard (sandboxes share the node's network)."""
        lines = [f"warning: podman sandboxes share the node's network (no reb-ray network, no host guard): every service "
                 "of the node (Ray's GCS and dashboard, sshd, the LLM proxy on loopback) is reachable from them"]
        try:
            facts = engine(connect(timeout=10))
        except RebRayError:
            return lines  # the sweep's own engine check stops it with the reason, once
        if not facts.enforces_limits:
            lines.append(f"warning: the Podman engine is rootless on cgroup {facts.cgroup_version} (controllers: "
                         f"{', '.join(facts.controllers) or 'none'}): memory, pids and CPU limits are NOT enforced "
                         "(rows say sandbox_limits_enforced=false; only the disk quota is watched)")
        return lines

    @classmethod
    def shared_engine_client(cls) -> docker.DockerClient:
        """This process's client of the Podman service (`podman_socket`), reused once made."""
        return shared_client()

    def filesystem_changes(self) -> list[dict] | None:
        """Podman's own list (its compatible `diff` endpoint): its storage is not Docker's
        overlay2, and a rootless one's layers are not this process's to read."""
        return self._client.api.diff(self.id) or []

    def _start(self, name: str) -> None:
        """Create the container through Podman's own endpoint (CDI GPUs), start it, then read
        its limits back (`limits_enforced`, `capabilities.enforces_limits`)."""
        config = self.config
        api = self._client.api
        try:
            res = api._post_json(api._url("/libpod/containers/create"), data=libpod_spec(config, name))
            if res.status_code == 404 and "image" in res.text.lower():
                raise ImageMissing(f"sandbox image {config.image} is not in the Podman store of this node: "
                                   f"{image_fix(config.image, 'minimal')}")
            api._raise_for_status(res)
            self.id = res.json()["Id"]
            self.warnings: list[str] = list(res.json().get("Warnings") or [])
            api.start(self.id)
        except ImageMissing:
            raise
        except (DockerException, requests.exceptions.RequestException) as exc:
            self._remove_by_name(name)
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            if "statfs" in first and "permission denied" in first:  # a rootless engine runs as its user
                first += ("; the Podman service's user cannot reach that bind source: make it readable to that user "
                          "(or run reb-ray as the user whose service it is)")
            raise RebRayError(f"cannot start podman sandbox from {config.image}: {first[:500]}") from None
        self._container = self._client.containers.get(self.id)
        self.limits_enforced = self._limits_held()
        self.capabilities = replace(PODMAN_CAPABILITIES, enforces_limits=self.limits_enforced)
        # Pausing freezes the container's cgroup; a rootless cgroup v1 container has none, and
        # the engine refuses to commit it paused. The harness commits only between phases,
        # after every process of the agent was killed, so nothing changes while it commits.
        self.pauses_to_commit = self.limits_enforced

    def _limits_held(self) -> bool:
        """True when every limit the config set reads back from the engine as set (a rootless
        cgroup v1 engine answers 0 for a memory or pids limit it dropped)."""
        try:
            host = self._client.api.inspect_container(self.id)["HostConfig"]
        except (DockerException, KeyError):
            return False
        if self.config.memory_bytes is not None and host.get("Memory") != self.config.memory_bytes:
            return False
        if self.config.pids_limit is not None and host.get("PidsLimit") != self.config.pids_limit:
            return False
        if self.config.cpus is not None and not host.get("NanoCpus") and not host.get("CpuQuota"):
            return False
        return True
