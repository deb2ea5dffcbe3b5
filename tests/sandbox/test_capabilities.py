"""Sandbox capabilities: every provider states what it can do, the statement is true of its real
sandboxes, and no code outside the provider registry asks a provider's name instead.

The claims are checked against real sandboxes: the local and sleeping ones in the unit tier, the
docker one (parametrised `provider="docker"`, so integration) against the real daemon.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import uuid
from dataclasses import MISSING, fields
from pathlib import Path

import pytest

from reb_ray.errors import RebRayError, UnknownName
from reb_ray.sandbox import PROVIDERS, SandboxCapabilities, SandboxConfig, capabilities_of, open_sandbox, provider_class
from reb_ray.sandbox.tap import TappedSandbox

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "reb_ray"
#: The one module that may dispatch on a provider's name: the registry that maps it to a class.
REGISTRY = PACKAGE / "sandbox" / "__init__.py"
#: Provider names, today's and the next one's.
PROVIDER_NAMES = frozenset({"docker", "local", "sleep", "podman"})
#: What a provider's name is held in: `x.provider`, `config.sandbox.provider`, or a variable of either name.
NAME_HOLDERS = frozenset({"provider", "sandbox"})


def _holds_a_name(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr in NAME_HOLDERS
    if isinstance(node, ast.Name):
        return node.id in NAME_HOLDERS
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
        return (len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in NAME_HOLDERS)  # getattr(sandbox, "provider", None)
    return False


def _is_a_name(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in PROVIDER_NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):  # `provider in ("docker", "podman")`
        return any(_is_a_name(e) for e in node.elts)
    return False


def name_comparisons(source: str, filename: str = "<source>") -> list[int]:
    """Lines of `source` that compare a provider's name (`==`, `!=`, `in`, `not in`, `is`) with
    a provider name constant."""
    lines = []
    for node in ast.walk(ast.parse(source, filename)):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        for left, right in zip(operands, operands[1:]):
            if (_holds_a_name(left) and _is_a_name(right)) or (_holds_a_name(right) and _is_a_name(left)):
                lines.append(node.lineno)
                break
    return lines


@pytest.mark.parametrize("line", [
    'if sandbox.provider == "docker": pass',
    'x = 1 if config.sandbox.provider != "local" else 2',
    'ok = "podman" == spec.config.sandbox.provider',
    'ok = provider in ("docker", "podman")',
    'ok = getattr(box, "provider", None) != "sleep"',
    'ok = a < sandbox == "docker"',
])
def test_the_scan_finds_a_name_comparison(line):
    assert name_comparisons(line) == [1]


@pytest.mark.parametrize("line", [
    'if sandbox.capabilities.commit: pass',
    'ok = agent.name == "docker"',  # not a provider's name
    'ok = config.network.name == "bridge"',  # not a provider name
    'argv = ["docker", "save"]',
])
def test_the_scan_leaves_other_code_alone(line):
    assert name_comparisons(line) == []


def test_no_module_compares_a_provider_name():
    """What differs between providers is asked of their capabilities (`sandbox.capabilities`, or
    `capabilities_of(name)` before a sandbox exists), so a new provider needs no edit elsewhere."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == REGISTRY:
            continue
        found += [f"{path.relative_to(ROOT)}:{line}" for line in name_comparisons(path.read_text(), str(path))]
    assert found == []


@pytest.mark.parametrize("name", PROVIDERS)
def test_capabilities_of_a_name_are_its_class_s(name):
    cls = provider_class(name)
    assert cls.provider == name
    assert isinstance(cls.capabilities, SandboxCapabilities)
    assert capabilities_of(name) is cls.capabilities


def test_an_unknown_provider_is_refused_by_name():
    with pytest.raises(UnknownName, match="sandbox provider.*'dockr'.*valid: docker, local, podman, sleep"):
        capabilities_of("dockr")


def test_every_field_is_stated():
    """A frozen dataclass without defaults: a provider cannot leave a capability unsaid."""
    with pytest.raises(TypeError):
        SandboxCapabilities()  # type: ignore[call-arg]
    assert all(f.default is MISSING for f in fields(SandboxCapabilities))


def test_the_providers_differ_where_the_harness_asks():
    """Docker is a container: runs from an image, takes mounts and limits, has its own network,
    filesystem, processes and interpreters, and commits; local is host processes in a host
    directory; sleep keeps local's files but remaps absolute paths into its root."""
    docker, local, sleep = (capabilities_of(n) for n in ("docker", "local", "sleep"))
    assert docker.container_runtime == "docker" and local.container_runtime is None is sleep.container_runtime
    for field in ("image", "mounts", "enforces_limits", "own_network", "fixed_paths", "commit", "filesystem_diff"):
        assert getattr(docker, field) and not getattr(local, field) and not getattr(sleep, field), field
    assert local.host_paths and not docker.host_paths and not sleep.host_paths
    assert docker.own_processes and not local.own_processes
    assert docker.own_interpreters and not local.own_interpreters


# -- the claims, checked against real sandboxes -------------------------------------------------


@pytest.fixture(params=["docker", "local", "podman"])
def provider(request) -> str:
    return request.param


@pytest.fixture
def box(provider, request):
    """A real sandbox of `provider`, closed after the test."""
    if provider == "podman":
        request.getfixturevalue("podman_service")
    image = request.getfixturevalue("sandbox_image") if provider in ("docker", "podman") else None
    host_dir = Path(request.getfixturevalue("tmp_path"))
    if provider == "podman":  # the rootless engine's user must reach the bind source (pytest's is root's, 0700)
        import tempfile

        host_dir = Path(tempfile.mkdtemp(prefix="reb-ray-capability-"))
        host_dir.chmod(0o755)
        request.addfinalizer(lambda: __import__("shutil").rmtree(host_dir, ignore_errors=True))
    (host_dir / "mounted.txt").write_text("from the host\n")
    config = SandboxConfig(image=image, sweep_id="test", trial_id=request.node.name[:60], pids_limit=77,
                           mounts={str(host_dir): "/opt/reb-ray/capability-mount"})
    with open_sandbox(provider, config, trusted=True) as sandbox:
        yield sandbox


def test_a_view_asks_its_inner_sandbox(box):
    assert TappedSandbox(box, None).capabilities is box.capabilities


def test_host_paths(box):
    """host_paths: a file the host writes at a sandbox path is the one the sandbox reads there."""
    name = f"cap-{uuid.uuid4().hex}"
    box.exec(["sh", "-c", f"echo inside > {box.workdir}/{name}"])
    assert (Path(box.workdir) / name).is_file() is box.capabilities.host_paths


def test_own_processes(box):
    """own_processes: a host process is not among the sandbox's processes."""
    needle = f"{uuid.uuid4().int % 10**6 + 7000}.{os.getpid()}"
    host = subprocess.Popen(["sleep", needle])
    try:
        # Exact command lines only, so the search's own (which holds the needle) never matches.
        script = 'for d in /proc/[0-9]*; do [ "$( { tr "\\0" " " < $d/cmdline; } 2>/dev/null)" = "$1 " ] && echo $d; done; true'
        seen = box.exec(["sh", "-c", script, "list", f"sleep {needle}"]).output
    finally:
        host.kill()
        host.wait()
    assert bool(seen.strip()) is not box.capabilities.own_processes


def test_own_network(box):
    """own_network: the sandbox's network namespace is not the host's."""
    inside = box.exec(["readlink", "/proc/self/ns/net"]).output.strip()
    assert inside.startswith("net:")
    assert (inside != os.readlink("/proc/self/ns/net")) is box.capabilities.own_network


def test_own_interpreters(box):
    """own_interpreters: the sandbox's python3 is not a file of the host's."""
    out = box.exec(["python3", "-c", "import os, sys, json; s = os.stat(sys.executable); "
                    "print(json.dumps([os.path.realpath(sys.executable), s.st_dev, s.st_ino]))"]).output
    path, dev, ino = json.loads(out.strip().splitlines()[-1])
    try:
        host = os.stat(path)
        same = (host.st_dev, host.st_ino) == (dev, ino)
    except FileNotFoundError:
        same = False
    assert same is not box.capabilities.own_interpreters


def test_mounts(box):
    """mounts: a host directory given at open is at its sandbox path."""
    res = box.exec(["cat", "/opt/reb-ray/capability-mount/mounted.txt"])
    assert (res.output.strip() == "from the host") is box.capabilities.mounts


def test_enforces_limits(box):
    """enforces_limits: the config's pids limit is the sandbox's cgroup limit."""
    res = box.exec(["sh", "-c", "cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max"])
    assert (res.output.strip() == "77") is box.capabilities.enforces_limits


def test_fixed_paths(box):
    """fixed_paths: the image's fixed report path can be written (in the local sandbox it would
    be the host's, so only the docker claim is tried)."""
    from reb_ray.agents import REPORT_PATH

    if not box.capabilities.fixed_paths:
        pytest.skip("writing REPORT_PATH from a host-path sandbox would write the host's")
    assert box.exec(["sh", "-c", f"mkdir -p $(dirname {REPORT_PATH}) && echo '{{}}' > {REPORT_PATH}"]).ok
    assert box.read_bytes(REPORT_PATH) == b"{}\n"


def test_image_and_commit(provider, request):
    """image: a sandbox of the provider cannot open without one; commit and filesystem_diff: the
    runtime commits it and lists what changed."""
    caps = capabilities_of(provider)
    if provider == "podman":
        request.getfixturevalue("podman_service")
    config = SandboxConfig(image=None, sweep_id="test", trial_id=request.node.name[:60])
    if caps.image:
        with pytest.raises(RebRayError, match="no image"):
            open_sandbox(provider, config, trusted=True)
    else:
        open_sandbox(provider, config, trusted=True).close()
    if not (caps.commit and caps.filesystem_diff):
        return
    sandbox = open_sandbox(provider, config.model_copy(update={"image": request.getfixturevalue("sandbox_image")}))
    with sandbox:
        sandbox.exec(["sh", "-c", "echo x > /tmp/changed-by-the-agent"])
        assert "/tmp/changed-by-the-agent" in {e["Path"] for e in sandbox.client.api.diff(sandbox.id)}
        image = sandbox.commit_image(repository="reb-ray-capability-test", tag=uuid.uuid4().hex[:8], changes=[])
        sandbox.client.api.remove_image(image["Id"], force=True)


def test_sleep_sandbox_claims(tmp_path, monkeypatch):
    """The sleeping sandbox: an absolute path lands inside its root (not host_paths), nothing is
    mounted or limited, and opening needs no image."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"default": {"agent_s": 0, "probe_s": 0}}))
    monkeypatch.setenv("REB_RAY_SLEEP_SCRIPT", str(script))
    target = f"/opt/reb-ray-cap-{uuid.uuid4().hex}/f.txt"
    src = tmp_path / "f.txt"
    src.write_text("x")
    with open_sandbox("sleep", SandboxConfig(trial_id="t", mounts={str(tmp_path): "/opt/m"})) as box:
        caps = box.capabilities
        box.put(src, target)
        assert box.read_bytes(target) == b"x"
        assert Path(target).exists() is caps.host_paths is False
        assert not (caps.mounts or caps.enforces_limits or caps.image or caps.commit)


def test_the_limit_watch_follows_enforces_limits(provider, request):
    """A container sandbox is watched (its disk quota always, its pids limit only where the
    engine enforces limits: a rootless cgroup v1 Podman has no pids count); others are not."""
    from reb_ray.sandbox.limits import LimitWatch, NoWatch, watch_limits

    if provider == "podman":
        request.getfixturevalue("podman_service")
    image = request.getfixturevalue("sandbox_image") if provider in ("docker", "podman") else None
    with open_sandbox(provider, SandboxConfig(image=image, trial_id="t"), trusted=True) as sandbox:
        watch = watch_limits(sandbox)
        assert isinstance(watch, LimitWatch if sandbox.capabilities.image else NoWatch)
        if isinstance(watch, LimitWatch):
            assert watch.pids_limit == (sandbox.config.pids_limit if sandbox.capabilities.enforces_limits else None)

