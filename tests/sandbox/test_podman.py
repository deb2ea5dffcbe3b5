"""The Podman provider: the rules that need no engine (socket choice, the create body, what a
rootless engine enforces, the sweep's refusals), then the differences that the conformance suite
(tests/sandbox/test_conformance.py, run on rootless Podman too) does not cover, on a real
rootless service (`podman_service`): limits read back and recorded as not enforced, GPUs as CDI
devices, commit, reaping orphans by label, the node check and the image transfer."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from reb_ray.errors import DockerUnavailable
from reb_ray.sandbox import SandboxConfig, capabilities_of, open_sandbox
from reb_ray.sandbox.docker import podman_sandbox as pm


# -- no engine needed ------------------------------------------------------------------------
def test_socket_is_the_setting_then_reb_rays_variable_then_podmans(monkeypatch, tmp_path):
    monkeypatch.delenv(pm.SOCKET_ENV, raising=False)
    monkeypatch.setenv("CONTAINER_HOST", "unix:///run/from-container-host.sock")
    assert pm.podman_socket() == "unix:///run/from-container-host.sock"
    monkeypatch.setenv(pm.SOCKET_ENV, "/run/ours.sock")
    assert pm.podman_socket() == "unix:///run/ours.sock"
    assert pm.podman_socket("tcp://10.0.0.5:8888") == "tcp://10.0.0.5:8888"
    with pytest.raises(Exception, match="ssh:// is not supported"):
        pm.podman_socket("ssh://user@host/run/podman.sock")


def test_without_a_setting_the_first_existing_default_socket_is_used(monkeypatch, tmp_path):
    monkeypatch.delenv(pm.SOCKET_ENV, raising=False)
    monkeypatch.delenv("CONTAINER_HOST", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    if Path(pm.ROOTFUL_SOCKET).exists():
        pytest.skip("a rootful Podman socket exists on this machine")
    with pytest.raises(DockerUnavailable, match=f"no Podman socket .*{tmp_path}/podman/podman.sock"):
        pm.podman_socket()
    (tmp_path / "podman").mkdir()
    (tmp_path / "podman" / "podman.sock").touch()
    assert pm.podman_socket() == f"unix://{tmp_path}/podman/podman.sock"
    # unset (a root shell, su, a batch job): Podman's own default, /run/user/<uid> only where it
    # exists and is the user's, else $TMPDIR/podman-run-<uid>; spelled out, never the variable
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    monkeypatch.delenv("TMPDIR", raising=False)
    expected = (f"/run/user/{os.getuid()}" if Path(f"/run/user/{os.getuid()}").is_dir()
                else f"/tmp/podman-run-{os.getuid()}")
    assert pm.rootless_socket() == f"{expected}/podman/podman.sock"
    if Path(pm.rootless_socket()).exists():
        return
    with pytest.raises(DockerUnavailable) as err:
        pm.podman_socket()
    assert "$XDG_RUNTIME_DIR" not in str(err.value)
    if os.geteuid() == 0:  # root: a rootful service on the socket found without any setting
        assert f"setsid -f podman system service --time=0 unix://{pm.ROOTFUL_SOCKET} " in str(err.value)
    else:
        assert f"unix://{expected}/podman/podman.sock " in str(err.value)


def test_create_body_keeps_the_docker_providers_rules_and_gives_gpus_as_cdi_devices(tmp_path, monkeypatch):
    monkeypatch.delenv(pm.CDI_KIND_ENV, raising=False)
    (tmp_path / "wheels").mkdir()
    config = SandboxConfig(image="img:1", gpus=["1", "GPU-abc"], cpus=2.0, memory_bytes=2 * 1024**3, pids_limit=512,
                           env={"CUDA_VISIBLE_DEVICES": "7", "A": "b"}, mounts={str(tmp_path / "wheels"): "/wheels"},
                           propagated_mounts={str(tmp_path): "/toolchain"}, sweep_id="s", trial_id="t", attempt=2)
    spec = pm.libpod_spec(config, "reb-ray-x")
    assert spec["devices"] == [{"path": "nvidia.com/gpu=1"}, {"path": "nvidia.com/gpu=GPU-abc"}]
    assert spec["env"] == {"A": "b"}  # the host's CUDA_VISIBLE_DEVICES never enters
    assert spec["resource_limits"] == {"memory": {"limit": 2 * 1024**3, "swap": 2 * 1024**3}, "pids": {"limit": 512},
                                       "cpu": {"quota": 200_000, "period": 100_000}}
    assert spec["labels"]["reb-ray.managed"] == "true" and spec["labels"]["reb-ray.attempt"] == "2"
    assert spec["no_new_privileges"] is True and spec["cap_drop"] == ["ALL"] and "SYS_ADMIN" not in spec["cap_add"]
    assert {"destination": "/wheels", "source": str(tmp_path / "wheels"), "type": "bind", "options": ["rbind", "ro"]} in spec["mounts"]
    assert {"destination": "/toolchain", "source": str(tmp_path), "type": "bind", "options": ["rbind", "ro", "rslave"]} in spec["mounts"]
    assert spec["netns"] == {"nsmode": "host"} and spec["shm_size"] == config.shm_size_bytes
    assert pm.libpod_spec(config.model_copy(update={"network": "none"}), "n")["netns"] == {"nsmode": "none"}
    monkeypatch.setenv(pm.CDI_KIND_ENV, "amd.com/gpu")
    assert pm.libpod_spec(config, "y")["devices"][0] == {"path": "amd.com/gpu=1"}


@pytest.fixture
def open_dir():
    """A 0755 directory outside pytest's own 0700 base (which would stop every path in it)."""
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="reb-podman-reach-"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_path_is_unreachable_at_the_first_directory_its_user_cannot_pass(open_dir):
    """The rootless service's user (here `nobody`) must pass every directory above a bind source:
    a 0700 directory stops it there (as /root does the default wheel cache of a root venv), mode
    bits of owner, group and other decide, and a path not made yet is judged by its parents."""
    import pwd

    nobody = pwd.getpwnam("nobody").pw_uid
    private, shared = open_dir / "private", open_dir / "shared"
    (private / "wheels").mkdir(parents=True)
    (shared / "wheels").mkdir(parents=True)
    os.chmod(private, 0o700)
    assert pm.unreachable(private / "wheels", nobody) == private
    assert pm.unreachable(shared / "wheels", nobody) is None
    assert pm.unreachable(shared / "not-yet" / "wheels", nobody) is None
    assert pm.unreachable(private / "wheels", 0) is None  # a rootful service passes everything
    os.chown(private, nobody, -1)  # its owner passes its own 0700 directory
    assert pm.unreachable(private / "wheels", nobody) is None
    os.chmod(shared / "wheels", 0o711)  # passable but not listable: a find-links directory must be read
    assert pm.unreachable(shared / "wheels", nobody) == shared / "wheels"


def test_doctors_lines_for_another_users_service_run_through_runuser_and_quote_plainly(monkeypatch):
    """From a root shell the lines for another user's service run as that user (`runuser -l`),
    each one bash parses as one command line; the storage line resets before it writes."""
    import pwd

    if os.geteuid() != 0:
        pytest.skip("runuser lines are printed for a root shell")
    user = pwd.getpwnam("nobody")
    path = f"/tmp/podman-run-{user.pw_uid}/podman/podman.sock"
    for line in (pm.how_to_start(f"unix://{path}"), pm.storage_fix(path, user.pw_uid), pm.containers_fix(path, user.pw_uid),
                 pm.subuid_fix(user.pw_uid)):
        assert "runuser -l nobody -c " in line and "$XDG_RUNTIME_DIR" not in line, line
        assert subprocess.run(["bash", "-n", "-c", line]).returncode == 0, line
    storage = pm.storage_fix(path, user.pw_uid)
    assert storage.index("podman system reset -f") < storage.index("printf") and "rm -f" in storage
    assert f"unix://{path}" in pm.how_to_start(f"unix://{path}")


@pytest.mark.parametrize("rootless, controllers, enforced", [
    (False, (), True),  # rootful: the engine's own cgroups
    (True, (), False),  # rootless on cgroup v1: nothing delegated
    (True, ("cpu", "memory", "pids"), True),  # rootless on v2 with delegation
    (True, ("memory",), False),
])
def test_a_rootless_engine_enforces_limits_only_with_delegated_controllers(rootless, controllers, enforced):
    facts = pm.PodmanEngine("4.3.1", rootless, "v1", "cgroupfs", controllers, "overlay", "runc")
    assert facts.enforces_limits is enforced


def test_podman_declares_its_differences_as_capabilities():
    caps = capabilities_of("podman")
    assert caps.container_runtime == "podman" and caps.image and caps.commit and caps.mounts
    assert not caps.own_network  # no reb-ray network: no host guard, no egress proxy
    assert not caps.enforces_limits  # not assumed before the engine is asked


def test_a_podman_sweep_refuses_the_registries_policy_in_one_line():
    from pydantic import ValidationError

    from reb_ray.models.sweep import SweepConfig

    with pytest.raises(ValidationError, match="the podman sandbox shares the node's network, which no proxy can restrict"):
        SweepConfig(sandbox="podman", network_policy="registries")
    assert SweepConfig(sandbox="podman").network.policy == "open"


# -- a real rootless service -----------------------------------------------------------------
def _engine_user() -> int:
    return os.stat(pm.podman_socket().removeprefix("unix://")).st_uid


def test_the_service_is_rootless_and_not_dockers(podman_service):
    client = pm.connect()
    facts = pm.engine(client)
    assert facts.rootless and _engine_user() != 0
    assert facts.graph_driver == "overlay"  # fuse-overlayfs, not vfs (a start would copy the image)


def test_limits_are_read_back_and_recorded_as_not_enforced_where_dropped(podman_service, sandbox_image):
    box = open_sandbox("podman", SandboxConfig(image=sandbox_image, memory_bytes=256 * 1024**2, pids_limit=256,
                                               sweep_id="test", trial_id="limits"))
    try:
        facts = pm.engine(box.client)
        assert box.limits_enforced is facts.enforces_limits
        assert box.capabilities.enforces_limits is box.limits_enforced
        if not facts.enforces_limits:  # this machine: rootless on cgroup v1
            assert box.client.api.inspect_container(box.id)["HostConfig"]["Memory"] == 0
            assert any("limits" in line and "NOT enforced" in line for line in pm.PodmanSandbox.start_warnings())
    finally:
        box.close()


CDI_SPEC = """cdiVersion: "0.5.0"
kind: "reb-ray.test/gpu"
devices:
  - name: "0"
    containerEdits:
      env: ["REB_TEST_GPU0=given"]
  - name: "1"
    containerEdits:
      env: ["REB_TEST_GPU1=given"]
"""


def test_gpus_are_given_as_cdi_devices_by_physical_id(podman_service, sandbox_image, monkeypatch):
    """A CDI spec of a test vendor stands in for the NVIDIA toolkit's: the sandbox given physical
    GPU 1 gets device 1's edits and not device 0's (the engine resolved the CDI name)."""
    spec = Path("/etc/cdi/reb-ray-test-gpu.yaml")
    spec.parent.mkdir(exist_ok=True)
    spec.write_text(CDI_SPEC)
    monkeypatch.setenv(pm.CDI_KIND_ENV, "reb-ray.test/gpu")
    try:
        with open_sandbox("podman", SandboxConfig(image=sandbox_image, gpus=["1"], sweep_id="test", trial_id="cdi")) as box:
            init_env = box.exec(["sh", "-c", "tr '\\0' '\\n' < /proc/1/environ"]).output.split()
        assert "REB_TEST_GPU1=given" in init_env and "REB_TEST_GPU0=given" not in init_env
        with pytest.raises(Exception, match="cannot start podman sandbox"):
            open_sandbox("podman", SandboxConfig(image=sandbox_image, gpus=["9"], sweep_id="test", trial_id="cdi"))
    finally:
        spec.unlink()


def test_a_sandbox_commits_to_an_image_a_second_sandbox_starts_from(podman_service, sandbox_image):
    """GPU sharing's probe sandbox and the kept environment start from a committed image."""
    from reb_ray.sandbox.ownership import ATTEMPT_IMAGE

    with open_sandbox("podman", SandboxConfig(image=sandbox_image, sweep_id="test", trial_id="commit")) as box:
        box.exec("echo installed > /opt/marker")
        image = box.commit_image(repository="reb-ray/attempt", tag="podtest",
                                 changes=[f"LABEL {ATTEMPT_IMAGE}=true"])["Id"]
        client = box.client
    try:
        with pm.PodmanSandbox(SandboxConfig(image=image, sweep_id="test", trial_id="commit2"), client=client) as second:
            assert second.exec("cat /opt/marker").output.strip() == "installed"
        assert client.images.get(image).labels.get(ATTEMPT_IMAGE) == "true"
    finally:
        client.images.remove(image, force=True)


OWNER_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from reb_ray.sandbox import SandboxConfig
    from reb_ray.sandbox.docker.podman_sandbox import PodmanSandbox
    boxes = [PodmanSandbox(SandboxConfig(image=sys.argv[1], sweep_id="doomed", trial_id=f"t{i}")) for i in range(2)]
    print(" ".join(b.id for b in boxes), flush=True)
    time.sleep(600)
    """
)


def test_orphans_are_reaped_by_label_and_live_ones_kept(podman_service, sandbox_image):
    from reb_ray.sandbox.docker.reaper import reap

    owner = subprocess.Popen([sys.executable, "-c", OWNER_SCRIPT, sandbox_image], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    try:
        orphan_ids = owner.stdout.readline().split()
        assert len(orphan_ids) == 2
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    client = pm.connect()
    foreign = client.containers.create(sandbox_image, ["sleep", "infinity"], labels={"someone.else": "1"})
    live = pm.PodmanSandbox(SandboxConfig(image=sandbox_image, sweep_id="alive"), client)
    try:
        assert set(reap(client)) == set(orphan_ids)
        remaining = {c.id for c in client.containers.list(all=True)}
        assert foreign.id in remaining and live.id in remaining and not set(orphan_ids) & remaining
    finally:
        foreign.remove(force=True)
        live.close()


def test_the_node_check_uses_the_podman_store_and_names_what_is_missing(podman_service, sandbox_image):
    from reb_ray.node.health import check_node

    health = check_node(sandbox_image, sandbox="podman", min_free_bytes=0)
    assert health.image_present is True and health.docker is None, health.problems
    missing = check_node("reb-ray/sandbox:nothing-000000000000", sandbox="podman", min_free_bytes=0)
    assert missing.image_present is False
    assert any("docker save reb-ray/sandbox:nothing-000000000000 | podman load" in p for p in missing.problems)


def test_the_node_check_says_how_to_start_a_missing_service(monkeypatch, tmp_path):
    from reb_ray.node.health import check_node

    monkeypatch.setenv(pm.SOCKET_ENV, str(tmp_path / "absent.sock"))
    health = check_node("reb-ray/sandbox:any", sandbox="podman", min_free_bytes=0)
    assert health.docker is not None
    assert any(p.startswith("podman: Podman service at") and "podman system service" in p for p in health.problems)


def test_a_sweep_whose_wheel_cache_the_services_user_cannot_reach_stops_in_one_line(podman_service, tmp_path):
    """The wheel cache under a 0700 directory (pytest's own base, like /root for a root venv):
    every sandbox would fail to start, so the sweep stops before any trial with one line naming
    the path and the fix, and exits non-zero."""
    cache = tmp_path / "cache"
    proc = subprocess.run(["reb-ray", "sweep", "--suite", "demo", "--tasks", "numpy-trainer", "--sandbox", "podman",
                           "--agents", "noop", "--keep-environments", "none", "--output", str(tmp_path / "runs"), "--quiet"],
                          capture_output=True, text=True, timeout=600, env={**os.environ, "REB_RAY_CACHE_DIR": str(cache)})
    assert proc.returncode != 0
    [line] = [line for line in proc.stderr.splitlines() if "cannot reach" in line]
    assert f"cannot reach {cache}/wheels" in line and "export REB_RAY_CACHE_DIR=/var/cache/reb-ray" in line, line


def test_a_demo_sweep_runs_on_rootless_podman(podman_service, tmp_path):
    """The whole trial (placement, agent phase, between-phases exec, probe phase, artifacts) on
    the user's engine, through the `reb-ray sweep` command: the row scored, not an infra error,
    naming podman as its runtime and saying whether limits held. One noop trial: what is under
    test is the provider under a sweep, not the suite's verdicts (tests/test_sweep.py's subject);
    it keeps no environment (commit is `test_a_sandbox_commits...`'s subject). The pip cache is
    off: it lives in root's home, which the engine's user cannot mount (a cluster user's own
    home has no such problem)."""
    from reb_ray.results.read import read_trials

    out = tmp_path / "runs"
    proc = subprocess.run(["reb-ray", "sweep", "--suite", "demo", "--tasks", "numpy-trainer", "--sandbox", "podman",
                           "--agents", "noop", "--no-pip-cache", "--keep-environments", "none", "--output", str(out),
                           "--quiet"], capture_output=True, text=True, timeout=1500, env={**os.environ})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "podman sandboxes share the node's network" in proc.stderr
    [row] = read_trials(out).to_pylist()
    assert row["status"] == "scored" and row["failure_owner"] != "infra", row["failure_reason"]
    assert (row["task_id"], row["container_runtime"], row["env_keep_policy"]) == ("numpy-trainer", "podman", "none")
    assert row["sandbox_limits_enforced"] == pm.engine(pm.connect()).enforces_limits


# -- a new user's set-up, by doctor's own lines ----------------------------------------------
#: Doctor's checks whose fix is one shell line to run as printed.
RUNNABLE_FIXES = ("podman service", "subuid ranges", "podman storage", "podman mounts", "sandbox image",
                  "podman probe", "podman exec cleanup")


def _doctor(env: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """`reb-ray doctor --sandbox podman`: ({check: status}, {check: fix line as printed})."""
    proc = subprocess.run(["reb-ray", "doctor", "--sandbox", "podman"], capture_output=True, text=True, env=env, timeout=300)
    status, fixes = {}, {}
    for line in proc.stdout.splitlines():
        cells = [c.strip() for c in line.split("│")]
        if len(cells) >= 4 and cells[1] and cells[2] in ("ok", "warn", "fail"):
            status[cells[1]] = cells[2]
        elif line.startswith("fix ") and ": " in line:
            name, fix = line[4:].split(": ", 1)
            fixes[name] = fix
    return status, fixes


def _processes_of(uid: int) -> list[str]:
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if proc.stat().st_uid == uid and (proc / "stat").read_text().split(") ")[-1][0] != "Z":
                found.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:120])
        except (OSError, IndexError):
            continue
    return found


def test_a_new_user_sets_rootless_podman_up_by_running_doctors_fix_lines(podman_service, sandbox_image, tmp_path):
    """Root makes a fresh user whose first `podman info` made a vfs store (the state a user who
    tried Podman first is in), points reb-ray at that user's socket, then runs every fix line
    doctor prints, exactly as printed, in one shell, and runs doctor again, until no fix is left:
    the service, the vfs store (reset and overlay), the wheel cache under /root (moved by
    REB_RAY_CACHE_DIR), the image, the exec cleanup; then every Podman check is ok. Stopping the
    service then leaves no process of that user (conmon, the re-executed child, the pause process)."""
    import pwd

    user = "rebfirst"
    if subprocess.run(["id", user], capture_output=True).returncode == 0:
        subprocess.run(["userdel", "-r", "-f", user], capture_output=True)
    subprocess.run(["useradd", "-m", "-s", "/bin/bash", user], check=True, capture_output=True)
    uid = pwd.getpwnam(user).pw_uid
    shared_cache = Path(pm.SHARED_CACHE)
    cache_was_there = shared_cache.exists()
    socket = pm.rootless_socket(uid)
    try:
        subprocess.run(["runuser", "-l", user, "-c", "podman info >/dev/null 2>&1"], timeout=120)
        env = {k: v for k, v in os.environ.items() if k != "REB_RAY_CACHE_DIR"}
        env[pm.SOCKET_ENV] = socket  # the guide's first step: root points reb-ray at the user's socket
        ran: list[str] = []
        for _round in range(4):
            status, fixes = _doctor(env)
            todo = [fixes[name] for name in RUNNABLE_FIXES if name in fixes]
            if not todo:
                break
            ran += [name for name in RUNNABLE_FIXES if name in fixes]
            script = "\n".join(f"{line}\necho \"rc $?\"" for line in todo) + f"\nenv -0 > {tmp_path}/env"
            proc = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
            assert [line for line in proc.stdout.splitlines() if line.startswith("rc ")] == ["rc 0"] * len(todo), \
                (todo, proc.stdout[-1500:], proc.stderr[-1500:])
            exported = dict(item.split("=", 1) for item in (tmp_path / "env").read_text().split("\0") if "=" in item)
            env.update({k: exported[k] for k in ("REB_RAY_CACHE_DIR", pm.SOCKET_ENV) if k in exported})
        assert not todo, f"fixes left after 4 rounds: {todo}"
        assert {"podman service", "podman storage", "podman mounts", "sandbox image"} <= set(ran), ran
        assert all(status.get(name) == "ok" for name in RUNNABLE_FIXES), status
    finally:
        for pid in pm.service_pids(socket):
            os.kill(pid, signal.SIGTERM)
        subprocess.run(["runuser", "-l", user, "-c", "podman system migrate"], capture_output=True, timeout=120)
        left, deadline = _processes_of(uid), time.monotonic() + 3 * pm.EXEC_CLEANUP_DELAY_S
        while left and time.monotonic() < deadline:
            time.sleep(0.5)
            left = _processes_of(uid)
        for pid in [int(p.name) for p in Path("/proc").glob("[0-9]*") if _owned(p, uid)]:
            os.kill(pid, signal.SIGKILL)  # a failure above must not leave them to the next test
        subprocess.run(["userdel", "-r", "-f", user], capture_output=True)
        if not cache_was_there:
            shutil.rmtree(shared_cache, ignore_errors=True)
    assert not left, f"left after the service stopped: {left}"


def _owned(proc: Path, uid: int) -> bool:
    try:
        return proc.stat().st_uid == uid
    except OSError:
        return False
