"""`reb-ray doctor`: what this node has, and one line with the fix for each problem."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from reb_ray.errors import RebRayError

MIN_FREE_BYTES = 20 * 1024**3


@dataclass
class Check:
    """One doctor line. `level` is "ok", "warn" (works, degraded) or "fail" (cannot run)."""

    name: str
    level: str
    detail: str
    fix: str = ""


def check_docker_and_image(profile: str) -> list[Check]:
    """Docker daemon, NVIDIA runtime and the sandbox image for `profile`."""
    from reb_ray.sandbox.docker.docker_client import connect
    from reb_ray.sandbox.docker.image import image_tag, require_image

    try:
        client = connect(timeout=10)
    except RebRayError as exc:
        return [Check("docker", "fail", "daemon not reachable", str(exc).split(": ", 1)[-1]),
                Check("sandbox image", "fail", f"{image_tag(profile)} (unknown: no daemon)",
                      f"start Docker, then `reb-ray image build --profile {profile}`")]
    info = client.info()
    checks = [Check("docker", "ok", f"server {info.get('ServerVersion')}, root {info.get('DockerRootDir')}")]
    tag: str | None = None
    try:
        tag = require_image(client, profile)
        size = client.images.get(tag).attrs.get("Size", 0)
        image_check = Check("sandbox image", "ok", f"{tag} ({size / 1e9:.2f} GB)")
    except RebRayError as exc:
        image_check = Check("sandbox image", "fail", "missing", str(exc).split(": ", 1)[-1])
    checks += [check_docker_gpus(client, tag), image_check]
    checks.append(check_disk("docker disk", Path(info.get("DockerRootDir") or "/var/lib/docker")))
    return checks


def check_docker_gpus(client, image: str | None) -> Check:
    """Whether Docker gives containers GPUs: a probe container with a GPU device request
    (reb_ray.sandbox.docker.gpu_check), the same check each GPU node runs before a sweep's trials.
    A node without GPUs (no nvidia-smi) needs no NVIDIA runtime: nothing to fix there."""
    from reb_ray.sandbox.docker.gpu_check import NVIDIA_TOOLKIT_FIX, docker_gpu_problem

    if shutil.which("nvidia-smi") is None:
        return Check("nvidia runtime", "ok", "no GPUs here (nvidia-smi not found): none needed")
    problem = docker_gpu_problem(client, image)
    if problem is None:
        return Check("nvidia runtime", "ok", "containers get GPUs (a probe container with `--gpus all` ran)")
    return Check("nvidia runtime", "warn", f"{problem}: C3 and C4 are insufficient_hardware here (C2 too, unless the environment has no framework or a CPU-only build: those are the agent's)",
                 NVIDIA_TOOLKIT_FIX)


def check_gpus() -> Check:
    """GPUs seen by nvidia-smi on this node."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return Check("gpus", "warn", "none (nvidia-smi not found): C3/C4 fail as insufficient_hardware (owner hardware); C2 too, unless the environment has no framework or a CPU-only build", "run GPU stages on a GPU node")
    proc = subprocess.run([smi, "--query-gpu=index,name,driver_version", "--format=csv,noheader"],
                          capture_output=True, text=True, timeout=30)
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    if proc.returncode != 0 or not lines:
        return Check("gpus", "warn", f"nvidia-smi failed: {(proc.stderr or proc.stdout).strip()[:120]}", "check the NVIDIA driver")
    return Check("gpus", "ok", f"{len(lines)}: " + "; ".join(lines))


def check_ray() -> Check:
    try:
        import ray
    except ImportError:
        return Check("ray", "fail", "not importable", "pip install 'ray[default]'")
    return Check("ray", "ok", f"ray {ray.__version__}")


def check_pyright() -> Check:
    """The pinned pyright with its bundled node, run offline."""
    import sys

    proc = subprocess.run([sys.executable, "-m", "pyright", "--version"], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        return Check("pyright", "fail", (proc.stderr or proc.stdout).strip()[:120], "pip install 'pyright[nodejs]'")
    return Check("pyright", "ok", proc.stdout.strip().splitlines()[-1])


def check_disk(name: str, path: Path) -> Check:
    while not path.exists():
        path = path.parent
    free = shutil.disk_usage(path).free
    level = "ok" if free >= MIN_FREE_BYTES else "warn"
    return Check(name, level, f"{free / 1e9:.1f} GB free at {path}",
                 "" if level == "ok" else f"free space: built environments and kept images want >= {MIN_FREE_BYTES / 1e9:.0f} GB")


def check_host_guard() -> Check:
    """Whether this node can install the host guard docker sandboxes need (reb_ray/netpolicy/
    hostguard.py): iptables present and usable (root). Reads the filter table only."""
    from reb_ray.errors import InfraError
    from reb_ray.netpolicy.hostguard import check_usable

    try:
        check_usable()
    except InfraError as exc:
        return Check("host guard", "fail", str(exc).removeprefix("infra_network_guard: ")[:200],
                     "run sweeps as root with iptables installed, or set `network = \"bridge\"` (unguarded, recorded)")
    return Check("host guard", "ok", "iptables usable: sandboxes are kept off this node's services")


PODMAN_PACKAGES = "podman uidmap slirp4netns fuse-overlayfs"


def check_podman_and_image(profile: str, toolchains: Path | None = None) -> list[Check]:
    """The Podman service a `--sandbox podman` sweep would use, and each thing a rootless one
    needs configured: the packages, the socket, subordinate id ranges, the storage driver
    (overlay through fuse-overlayfs, not vfs), whether memory/pids/CPU limits hold (cgroup
    version and manager), the sandbox image in its store, a probe container started from it
    (Podman's default rlimits above the node's hard limits fail every start), and CDI specs
    for GPUs; whether the service's user can reach the default bind sources (`toolchains`: the
    agent toolchains' root, given by the caller). Each problem has its fix."""
    from reb_ray.sandbox.docker import podman_sandbox as pm
    from reb_ray.sandbox.docker.image import image_tag

    checks: list[Check] = []
    if shutil.which("podman") is None:
        checks.append(Check("podman", "warn", "the podman command is not installed here (a remote service may still answer)",
                            f"apt-get install -y {PODMAN_PACKAGES}"))
    try:
        client = pm.connect(timeout=10)
    except RebRayError as exc:
        return [*checks, Check("podman service", "fail", str(exc).split(": ", 1)[0][:200], pm.how_to_start()),
                Check("sandbox image", "fail", f"{image_tag(profile)} (unknown: no Podman service; run doctor again once it answers)")]
    facts = pm.engine(client)
    mode = "rootless" if facts.rootless else "rootful"
    url = pm.podman_socket()
    path = url.removeprefix("unix://") if url.startswith("unix://") else None
    uid = facts.uid if facts.uid is not None else (pm.socket_uid(path) if path else os.getuid())
    checks.append(Check("podman service", "ok", f"{url}: podman {facts.version}, {mode} (user {pm._user_name(uid)}), "
                        f"runtime {facts.runtime}, cgroup {facts.cgroup_version} ({facts.cgroup_manager})"))
    if facts.rootless:
        ranges = Check("subuid ranges", "ok", f"{facts.uid_ranges} subordinate ids mapped")
        if facts.uid_ranges < 65536:
            ranges = Check("subuid ranges", "fail", f"{facts.uid_ranges} subordinate ids mapped (images with system users need 65536)",
                           pm.subuid_fix(uid))
        checks.append(ranges)
    driver = Check("podman storage", "ok", f"driver {facts.graph_driver}")
    if facts.graph_driver != "overlay":
        fix = (pm.storage_fix(path, uid) if path and facts.rootless else
               'storage.conf of the service\'s user: [storage] driver = "overlay" (rootless: [storage.options.overlay] '
               'mount_program = "/usr/bin/fuse-overlayfs"), then `podman system reset` and restart the service')
        driver = Check("podman storage", "warn", f"driver {facts.graph_driver}: every container start copies the image (16-22 s instead of 0.3 s)", fix)
    checks.append(driver)
    if facts.enforces_limits:
        checks.append(Check("podman limits", "ok", f"memory, pids and CPU limits enforced ({', '.join(facts.controllers) or mode})"))
    else:
        checks.append(Check("podman limits", "warn", f"rootless on cgroup {facts.cgroup_version}: memory, pids and CPU limits are not enforced "
                            "(rows record sandbox_limits_enforced=false)",
                            "boot with cgroup v2 (systemd.unified_cgroup_hierarchy=1) and delegate memory, pids and cpu to users "
                            "(systemd `Delegate=yes`), or run a rootful Podman service"))
    if facts.rootless:
        checks.append(_mounts_check(uid, toolchains))
    tag: str | None = None
    try:
        tag = pm.PodmanSandbox.require_image(client, profile)
        checks.append(Check("sandbox image", "ok", f"{tag} in the Podman store"))
    except RebRayError:
        checks.append(Check("sandbox image", "fail", "missing from the Podman store", _image_fix(image_tag(profile), profile, uid, url)))
    if tag is not None:
        checks.append(_podman_probe(client, tag, path, uid))
    if facts.rootless and path:
        checks.append(_exec_cleanup_check(path, uid))
    checks.append(_cdi_check())
    return checks


def _image_fix(tag: str, profile: str, uid: int, url: str) -> str:
    """One shell line copying the sandbox image from this node's Docker into the service's store
    (as that user), or the words for a node without Docker or a service elsewhere."""
    from reb_ray.sandbox.docker import podman_sandbox as pm

    if shutil.which("docker") is None or not url.startswith("unix://"):
        return pm.image_fix(tag, profile)
    return (f"docker save {tag} | {pm.as_user('podman load', uid)}  # the image `reb-ray image build --profile {profile}` "
            "built with Docker, into the Podman store")


def _mounts_check(uid: int, toolchains: Path | None) -> Check:
    """Whether the rootless service's user can reach what a sweep bind-mounts into sandboxes by
    default: the node's wheel cache, the agent toolchains, the wheelhouses and the CA bundle (a
    path under a 0700 home, /root above all, fails every start with "statfs: permission denied")."""
    from reb_ray.models.sweep import SweepConfig
    from reb_ray.sandbox.docker import podman_sandbox as pm

    blocked = pm.blocked_binds(pm.bind_sources(SweepConfig().sandbox, toolchains), uid)
    if not blocked:
        return Check("podman mounts", "ok", f"{pm._user_name(uid)} can read the wheel cache, toolchains ({toolchains}) "
                     "and wheelhouses")
    return Check("podman mounts", "fail", "; ".join(f"{pm._user_name(uid)} cannot reach {p} ({stop} is "
                                                       f"{oct(stop.stat().st_mode & 0o777)})" for p, stop in blocked.items()),
                 pm.mount_fix(blocked, uid))


def _exec_cleanup_check(path: str, uid: int) -> Check:
    """Whether the service's user set `exit_command_delay` low (containers.conf): Podman keeps each
    exec session's conmon 300 s after the exec by default, so a sweep leaves one per exec for five
    minutes, the service stopped or not."""
    import tomllib

    from reb_ray.sandbox.docker import podman_sandbox as pm

    delay = 300
    for conf in (Path("/usr/share/containers/containers.conf"), Path("/etc/containers/containers.conf"),
                 Path(pm._home(uid)) / ".config/containers/containers.conf"):
        try:
            delay = int(tomllib.loads(conf.read_text()).get("engine", {}).get("exit_command_delay", delay))
        except (OSError, ValueError, tomllib.TOMLDecodeError):
            continue
    if delay <= pm.EXEC_CLEANUP_DELAY_S:
        return Check("podman exec cleanup", "ok", f"an exec's conmon exits {delay} s after it")
    return Check("podman exec cleanup", "warn", f"an exec's conmon stays {delay} s after it (Podman's default): a sweep leaves "
                 "one per exec, after the service has stopped too", pm.containers_fix(path, uid))


def _podman_probe(client, tag: str, path: str | None, uid: int) -> Check:
    """Start a sandbox from `tag` on the Podman service and run `true` in it: what fails every
    trial (rlimits above the node's hard limits, a runtime that refuses the cgroup layout)
    fails here first; the fix writes the user's containers.conf and restarts the service."""
    from reb_ray.sandbox.base import SandboxConfig
    from reb_ray.sandbox.docker import podman_sandbox as pm

    try:
        with pm.PodmanSandbox(SandboxConfig(image=tag, sweep_id="doctor", trial_id="probe", pids_limit=None,
                                            shm_size_bytes=64 * 1024**2), client=client) as box:
            result = box.exec(["true"], timeout=30)
    except RebRayError as exc:
        fix = (pm.containers_fix(path, uid) if path else
               'containers.conf of the service\'s user: [containers] default_ulimits at most the node\'s hard limits '
               '(`ulimit -Hn`, `ulimit -Hu`), [engine] runtime = "runc" and cgroup_manager = "cgroupfs"; restart the service')
        return Check("podman probe", "fail", str(exc)[:200], fix)
    if not result.ok:
        return Check("podman probe", "fail", f"`true` in a sandbox exited {result.exit_code}: {result.output[:120]}",
                     f"{pm.as_user(f'podman run --rm {tag} true', uid)}  # shows the engine's own error")
    return Check("podman probe", "ok", "a sandbox started, ran `true` and was removed")


def _cdi_check() -> Check:
    """GPUs reach Podman containers through CDI specs (`nvidia.com/gpu=N`), written by the
    NVIDIA container toolkit into /etc/cdi or /var/run/cdi."""
    from reb_ray.sandbox.docker.podman_sandbox import GPU_CDI_KIND

    if shutil.which("nvidia-smi") is None:
        return Check("cdi specs", "ok", "no GPUs here (nvidia-smi not found): none needed")
    for directory in (Path("/etc/cdi"), Path("/var/run/cdi")):
        for spec in sorted(directory.glob("*")) if directory.is_dir() else []:
            try:
                if GPU_CDI_KIND in spec.read_text():  # the spec's `kind: nvidia.com/gpu`
                    return Check("cdi specs", "ok", f"{spec} names {GPU_CDI_KIND} devices")
            except OSError:
                continue
    return Check("cdi specs", "warn", f"no CDI spec for {GPU_CDI_KIND} in /etc/cdi or /var/run/cdi: podman sandboxes get no GPUs "
                 "(C3 and C4 are insufficient_hardware)", "nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml (as root)")


def run_checks(profile: str, sandbox: str = "docker", toolchains: Path | None = None) -> list[Check]:
    """All checks for sweeps on `sandbox` (docker, or podman: its service instead of Docker's
    daemon, and no host guard to check since podman sandboxes share the node's network), in
    display order."""
    from reb_ray.sandbox import capabilities_of

    if capabilities_of(sandbox).container_runtime == "podman":
        engine_checks = [*check_podman_and_image(profile, toolchains),
                         Check("host guard", "warn", "podman sandboxes share the node's network: no host guard, no `registries` policy",
                               "use the docker sandbox where the node's services must be closed to agents")]
    else:
        engine_checks = [*check_docker_and_image(profile), check_host_guard()]
    return [*engine_checks, check_gpus(), check_ray(), check_pyright(), check_disk("output disk", Path.cwd())]
