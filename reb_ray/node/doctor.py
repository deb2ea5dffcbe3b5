"""`reb-ray doctor`: what this node has, and one line with the fix for each problem."""

from __future__ import annotations

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


def check_podman_and_image(profile: str) -> list[Check]:
    """The Podman service a `--sandbox podman` sweep would use, and each thing a rootless one
    needs configured: the packages, the socket, subordinate id ranges, the storage driver
    (overlay through fuse-overlayfs, not vfs), whether memory/pids/CPU limits hold (cgroup
    version and manager), the sandbox image in its store, a probe container started from it
    (Podman's default rlimits above the node's hard limits fail every start), and CDI specs
    for GPUs. Each problem has its fix."""
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
                Check("sandbox image", "fail", f"{image_tag(profile)} (unknown: no Podman service)",
                      pm.image_fix(image_tag(profile), profile))]
    facts = pm.engine(client)
    mode = "rootless" if facts.rootless else "rootful"
    checks.append(Check("podman service", "ok", f"{pm.podman_socket()}: podman {facts.version}, {mode}, "
                        f"runtime {facts.runtime}, cgroup {facts.cgroup_version} ({facts.cgroup_manager})"))
    if facts.rootless:
        ranges = Check("subuid ranges", "ok", f"{facts.uid_ranges} subordinate ids mapped")
        if facts.uid_ranges < 65536:
            ranges = Check("subuid ranges", "fail", f"{facts.uid_ranges} subordinate ids mapped (images with system users need 65536)",
                           "add `USER:100000:65536` to /etc/subuid and /etc/subgid (as root), then `podman system migrate`")
        checks.append(ranges)
    driver = Check("podman storage", "ok", f"driver {facts.graph_driver}")
    if facts.graph_driver != "overlay":
        driver = Check("podman storage", "warn", f"driver {facts.graph_driver}: every container start copies the image (16-22 s instead of 0.3 s)",
                       '~/.config/containers/storage.conf: [storage] driver = "overlay", runroot = "$XDG_RUNTIME_DIR/containers", '
                       'graphroot = "$HOME/.local/share/containers/storage" (both spelled out) and [storage.options.overlay] '
                       'mount_program = "/usr/bin/fuse-overlayfs"; then `podman system reset`')
    checks.append(driver)
    if facts.enforces_limits:
        checks.append(Check("podman limits", "ok", f"memory, pids and CPU limits enforced ({', '.join(facts.controllers) or mode})"))
    else:
        checks.append(Check("podman limits", "warn", f"rootless on cgroup {facts.cgroup_version}: memory, pids and CPU limits are not enforced "
                            "(rows record sandbox_limits_enforced=false)",
                            "boot with cgroup v2 (systemd.unified_cgroup_hierarchy=1) and delegate memory, pids and cpu to users "
                            "(systemd `Delegate=yes`), or run a rootful Podman service"))
    tag: str | None = None
    try:
        tag = pm.PodmanSandbox.require_image(client, profile)
        checks.append(Check("sandbox image", "ok", f"{tag} in the Podman store"))
    except RebRayError as exc:
        checks.append(Check("sandbox image", "fail", "missing from the Podman store", pm.image_fix(image_tag(profile), profile)))
    if tag is not None:
        checks.append(_podman_probe(client, tag))
    checks.append(_cdi_check())
    return checks


def _podman_probe(client, tag: str) -> Check:
    """Start a sandbox from `tag` on the Podman service and run `true` in it: what fails every
    trial (rlimits above the node's hard limits, a runtime that refuses the cgroup layout)
    fails here first."""
    from reb_ray.sandbox.base import SandboxConfig
    from reb_ray.sandbox.docker.podman_sandbox import PodmanSandbox

    try:
        with PodmanSandbox(SandboxConfig(image=tag, sweep_id="doctor", trial_id="probe", pids_limit=None,
                                         shm_size_bytes=64 * 1024**2), client=client) as box:
            result = box.exec(["true"], timeout=30)
    except RebRayError as exc:
        text = str(exc)
        fix = ("~/.config/containers/containers.conf: [engine] runtime = \"runc\" and cgroup_manager = \"cgroupfs\" "
               "(crun refuses a hybrid cgroup layout; the systemd manager needs a user session)")
        if "rlimit" in text:
            fix = ('~/.config/containers/containers.conf: [containers] default_ulimits = ["nofile=1024:20000", '
                   '"nproc=4096:4096"] (at most the node\'s hard limits: `ulimit -Hn`, `ulimit -Hu`)')
        return Check("podman probe", "fail", text[:200], fix)
    if not result.ok:
        return Check("podman probe", "fail", f"`true` in a sandbox exited {result.exit_code}: {result.output[:120]}",
                     "check `podman run --rm IMAGE true` as the Podman user")
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


def run_checks(profile: str, sandbox: str = "docker") -> list[Check]:
    """All checks for sweeps on `sandbox` (docker, or podman: its service instead of Docker's
    daemon, and no host guard to check since podman sandboxes share the node's network), in
    display order."""
    from reb_ray.sandbox import capabilities_of

    if capabilities_of(sandbox).container_runtime == "podman":
        engine_checks = [*check_podman_and_image(profile),
                         Check("host guard", "warn", "podman sandboxes share the node's network: no host guard, no `registries` policy",
                               "use the docker sandbox where the node's services must be closed to agents")]
    else:
        engine_checks = [*check_docker_and_image(profile), check_host_guard()]
    return [*engine_checks, check_gpus(), check_ray(), check_pyright(), check_disk("output disk", Path.cwd())]
