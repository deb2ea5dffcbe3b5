"""Shared fixtures: a real Docker daemon and the real sandbox image (CI builds both first)."""

from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path

import pytest

# CLI tests run the real console scripts (`reb-ray`) installed beside the interpreter running
# pytest, whether or not its venv is activated (CI runs `.venv/bin/python -m pytest`).
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"

# pytest keeps its assertion rewriting of each test module in __pycache__ only when bytecode may
# be written; with PYTHONDONTWRITEBYTECODE set (some shells and CI images set it) every run paid
# about 8 CPU-s to rewrite the ~300 test modules again. Only this process writes: subprocesses
# keep the environment's choice.
sys.dont_write_bytecode = False

from reb_ray.sandbox import SandboxConfig, open_sandbox  # noqa: E402

#: The per-file time budgets (tests/budgets.json), checked at the end of every run.
pytest_plugins = ("tests.helpers.budget",)


@pytest.fixture(scope="session", autouse=True)
def keep_no_environments_unless_asked():
    """Trials this test process runs keep no environment image unless their test names a keep
    policy (tests.helpers.keep_default says why); the product's default is back at the end."""
    from tests.helpers.keep_default import PRODUCT_DEFAULT, TEST_DEFAULT, set_default

    set_default(TEST_DEFAULT)
    yield
    set_default(PRODUCT_DEFAULT)


@pytest.fixture(scope="session")
def docker_client(tmp_path_factory):
    """A client of the real daemon. Fails (never skips) when Docker is unavailable.

    Sweeps keep their successes' environments as images by default; at the session's end the
    images this session's own runs recorded (the `env_image_id` of every trials row under the
    session's temporary directory) are removed, and nobody else's: a user's sweep on the same
    daemon keeps what it kept."""
    from reb_ray.sandbox.docker.docker_client import connect

    client = connect()
    yield client
    for image_id in _kept_by_this_session(tmp_path_factory.getbasetemp()):
        try:
            client.images.remove(image_id, force=True)
        except Exception:  # noqa: BLE001 - gone already, or in use: the disk budget handles it later
            pass


def _kept_by_this_session(base: Path) -> set[str]:
    """Image ids of the kept environments recorded in the trials rows of every output directory
    under `base`."""
    from reb_ray.errors import RebRayError
    from reb_ray.results.layout import TRIALS_DIR
    from reb_ray.results.read import read_trials

    ids: set[str] = set()
    for trials in base.rglob(TRIALS_DIR):
        if not trials.is_dir():
            continue
        try:
            table = read_trials(trials.parent, columns=["env_image_id"])
        except (RebRayError, OSError):
            continue
        ids.update(i for i in table["env_image_id"].to_pylist() if i)
    return ids


@pytest.fixture(scope="session")
def sandbox_image(docker_client) -> str:
    """The minimal profile's image, built if missing (a no-op when CI already built it)."""
    from reb_ray.sandbox.docker.image import build_image

    return build_image(docker_client, "minimal").tag


@pytest.fixture(scope="session")
def podman_service(sandbox_image):
    """A rootless Podman service of a non-root user, with the sandbox image in its store, set up
    here as root (tests/podman_service.py); REB_RAY_PODMAN_SOCKET points at it for the session.
    Skips, saying why, only where Podman cannot be installed or set up (not root)."""
    from tests.podman_service import PodmanUnavailableHere, RootlessPodman

    service = RootlessPodman()
    try:
        service.ensure(sandbox_image)
    except PodmanUnavailableHere as exc:
        pytest.skip(f"rootless Podman unavailable here: {exc}")
    before = os.environ.get("REB_RAY_PODMAN_SOCKET")
    os.environ["REB_RAY_PODMAN_SOCKET"] = service.url
    yield service
    if before is None:
        os.environ.pop("REB_RAY_PODMAN_SOCKET", None)
    else:
        os.environ["REB_RAY_PODMAN_SOCKET"] = before
    service.close()


#: Providers whose sandboxes run from the sandbox image on an engine (the conformance suite
#: needs a daemon or service for them: `integration`).
IMAGE_PROVIDERS = ("docker", "podman")


@pytest.fixture(params=["docker", "local", "podman"])
def provider(request) -> str:
    return request.param


@pytest.fixture
def make_sandbox(provider, request):
    """Factory for sandboxes of the parametrised provider; all are closed after the test."""
    made = []
    if provider == "podman":
        request.getfixturevalue("podman_service")

    def make(**overrides):
        image = request.getfixturevalue("sandbox_image") if provider in IMAGE_PROVIDERS else None
        config = SandboxConfig(image=image, sweep_id="test", trial_id=request.node.name[:60], **overrides)
        sandbox = open_sandbox(provider, config, trusted=True)
        made.append(sandbox)
        return sandbox

    yield make
    for sandbox in made:
        sandbox.close()


# Tests marked `nexau_src` need a NexAU source checkout (NexAU is not on PyPI), named by
# REB_RAY_NEXAU_SRC. Without one they are deselected by design, never skipped silently: pytest
# counts them as deselected and the summary names them and the variable that runs them.
NEXAU_SRC_ENV = "REB_RAY_NEXAU_SRC"
_NOT_RUN_BY_DESIGN: list[str] = []


#: Markers that mean "needs a real daemon, cluster or CLI": their tests are `integration`.
INTEGRATION_MARKERS = ("docker", "agent_cli", "cluster_up", "nexau_src")
#: Fixtures that start or reach a real daemon or cluster; a test that uses one (directly or
#: through another fixture) is `integration` without having to say so.
INTEGRATION_FIXTURES = frozenset({
    "docker_client", "sandbox_image", "make_sandbox", "ray_local", "private_dockerd", "second_docker",
    "raylets", "two_gpu_nodes", "two_single_gpu_nodes", "one_gpu_node", "ray_with_two_fake_gpus",
    "docker_sandbox", "torch_sandbox", "toolbox_ready", "installed_toolchain", "nexau_toolchain",
    "mini_bin", "cli_bin", "mixed_nodes", "slow_process", "podman_service", "demo_sweep", "adversary_runs",
})
#: Where the unit tier points Docker: a socket that does not exist, so a test that reaches for the
#: daemon without being marked fails at once instead of silently slowing the tier down.
UNIT_TIER_DOCKER_HOST = "unix:///nonexistent/reb-ray-unit-tier-has-no-docker.sock"


def _unit_tier(config) -> bool:
    """True when this run selects `not integration` (the one-minute tier)."""
    return "not integration" in (config.option.markexpr or "")


def pytest_xdist_auto_num_workers(config):
    """`-n auto`: one worker per core. The suite's heavy tests are CPU-bound once run side by side
    (containers, Ray daemons, pip and pyright in the sandboxes); more workers than cores only
    stretch each test's timeouts."""
    return max(2, os.cpu_count() or 1)


def pytest_addoption(parser):
    parser.addoption("--lanes", action="store_true", default=False,
                     help="with -n 2: run the suite as two lanes side by side, the Ray-cluster tests of "
                          "tests/orchestrators/ (which mostly wait) on one worker, everything else on the other")


def pytest_configure(config):
    config.addinivalue_line("markers", "integration: uses Docker, Ray, a CLI agent or a private "
                            "daemon (set automatically from markers and fixtures); `-m 'not integration'` "
                            "is the unit tier")
    if _unit_tier(config):
        os.environ["DOCKER_HOST"] = UNIT_TIER_DOCKER_HOST
        import ray

        def _no_ray(*args, **kwargs):
            raise RuntimeError("the unit tier starts no Ray: mark this test `integration` "
                               "(or give it an integration fixture)")
        ray.init = _no_ray


def _mark_integration(items) -> None:
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if (any(item.get_closest_marker(name) for name in INTEGRATION_MARKERS)
                or INTEGRATION_FIXTURES.intersection(getattr(item, "fixturenames", ()))
                or params.get("provider") in IMAGE_PROVIDERS):
            item.add_marker(pytest.mark.integration)


#: Test files that share one machine-wide thing run on one worker, one after another, when the
#: suite runs side by side (`-n`, pytest-xdist with `--dist loadgroup`); every other file is a
#: group of its own, so a module's fixtures (a Ray, a sandbox with torch) are made once.
SHARED_STATE_GROUPS = {
    # second Docker daemons with their own bridges and containerd
    "private-dockerd": ("orchestrators/test_faults.py", "orchestrators/test_node_check.py"),
    # tests that count every managed container on the shared daemon, or the GPU check's
    "daemon-wide": ("orchestrators/test_orphans.py", "sandbox/test_docker_sandbox.py", "sandbox/test_gpu_check.py",
                    "orchestrators/test_docker_without_gpus.py"),
}
#: The rootless Podman service is one user, one socket and one store: its tests run in one group.
PODMAN_GROUP = "podman"
#: The files whose adversaries run as one batch (`adversary_runs`) run on one worker: on two, each
#: worker would run the whole batch.
ADVERSARIES_GROUP = "adversaries"


#: Tests that look at the whole machine run alone when the suite runs side by side: every
#: iptables rule (the host guard's "nothing else changed"), every dead owner's container (the
#: reaper, which a sweep's start also runs), a cut of loopback, GPU-lease timings in tenths of a
#: second. While one runs, the other workers wait between tests (`_alone_or_beside`).
ALONE_FILES = ("netpolicy/test_hostguard.py", "netpolicy/test_guard_watch.py", "orchestrators/test_partition.py",
               "sandbox/test_reaper.py", "orchestrators/test_gpu_sharing.py")


def _relative(item) -> str:
    return _relative_path(str(item.fspath))


@functools.lru_cache(maxsize=None)
def _relative_path(fspath: str) -> str:
    path = Path(fspath).resolve()
    here = Path(__file__).resolve().parent
    return path.relative_to(here).as_posix() if path.is_relative_to(here) else path.as_posix()


@pytest.fixture(autouse=True)
def _alone_or_beside(request, tmp_path_factory):
    """With workers (`-n`): an ALONE_FILES test holds the run's lock exclusively, every other test
    shares it. A waiting exclusive holder first takes the turnstile, so tests that start later
    wait behind it instead of starving it. Without workers: nothing."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        yield
        return
    import fcntl

    root = tmp_path_factory.getbasetemp().parent  # the run's directory, shared by its workers
    alone = _relative(request.node) in ALONE_FILES
    with open(root / "alone.turnstile", "a") as turnstile, open(root / "alone.lock", "a") as lock:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        if alone:
            fcntl.flock(lock, fcntl.LOCK_EX)
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        else:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
            fcntl.flock(lock, fcntl.LOCK_SH)
        yield


#: `--lanes`: the lane of the tests that mostly wait. The Ray-cluster tests of tests/orchestrators/
#: spend most of their time in sleeping sandboxes, dead nodes and timeouts that must elapse, and
#: so use little of the CPU that the other lane (containers, pip, pyright, browsers) is bound by.
#: Their daemon-wide files stay in the other lane, with the rest of their group.
WAITING_LANE, WORKING_LANE = "lane-waiting", "lane-working"
WAITING_DIR = "orchestrators/"


def _group_of(item, lanes: bool = False) -> str:
    path = _relative(item)
    params = getattr(getattr(item, "callspec", None), "params", {})
    if "podman_service" in getattr(item, "fixturenames", ()) or params.get("provider") == "podman":
        group = PODMAN_GROUP
    elif getattr(getattr(item, "module", None), "ADVERSARY_GROUP", None) is not None:
        group = ADVERSARIES_GROUP
    else:
        group = next((group for group, files in SHARED_STATE_GROUPS.items() if path in files), path)
    if not lanes:
        return group
    return WAITING_LANE if path.startswith(WAITING_DIR) and group != "daemon-wide" else WORKING_LANE


#: Seconds each test file took in a full side-by-side run (`scripts/test_seconds.py` writes it
#: from a JUnit report). A file not listed counts as UNLISTED_S.
FILE_SECONDS = Path(__file__).resolve().parent / "file_seconds.json"
UNLISTED_S = 5


def _group_for_workers(items, lanes: bool = False) -> None:
    """Give each test its group (with `lanes`, one of the two lanes), then put the longest groups
    first (stable: a file's tests keep their order), so a side-by-side run hands out its long
    files at the start and does not end waiting on one worker's (longest-processing-time-first).
    A serial run needs neither, and keeps the files' order."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    seconds = json.loads(FILE_SECONDS.read_text()) if FILE_SECONDS.is_file() else {}
    groups = {id(item): _group_of(item, lanes) for item in items}
    weight: dict[str, float] = {}
    for group, path in {(groups[id(item)], _relative(item)) for item in items}:
        weight[group] = weight.get(group, 0) + seconds.get(path, UNLISTED_S)
    for item in items:
        item.add_marker(pytest.mark.xdist_group(groups[id(item)]))
    items.sort(key=lambda item: -weight[groups[id(item)]])


#: The first test that asks for the adversaries' batch runs all of it (tests/helpers/adversaries.py),
#: and possibly the demo sweep before it: minutes, not one test's usual 300 s.
ADVERSARIES_TIMEOUT_S = 900


def pytest_collection_modifyitems(config, items):
    _mark_integration(items)
    for item in items:
        if "adversary_runs" in getattr(item, "fixturenames", ()) and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(ADVERSARIES_TIMEOUT_S))
    _group_for_workers(items, config.getoption("--lanes"))
    if os.environ.get(NEXAU_SRC_ENV):
        return
    keep = [item for item in items if item.get_closest_marker("nexau_src") is None]
    dropped = [item for item in items if item.get_closest_marker("nexau_src") is not None]
    if dropped:
        _NOT_RUN_BY_DESIGN[:] = [item.nodeid for item in dropped]
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def pytest_terminal_summary(terminalreporter):
    if _NOT_RUN_BY_DESIGN:
        terminalreporter.write_line(f"not run by design: {len(_NOT_RUN_BY_DESIGN)} nexau_src tests "
                                    f"(set {NEXAU_SRC_ENV} to a NexAU checkout to run them): "
                                    + ", ".join(n.rsplit("::", 1)[-1] for n in _NOT_RUN_BY_DESIGN))


@pytest.fixture
def slow_process():
    """Declares that the test starts a heavy real process and so belongs to the integration tier:
    a whole trial (pyright, the probes, an agent's pip installs), a toolchain download, a child
    pytest or benchmark, a writer killed mid-write, a timeout that must really elapse. Such a test
    takes seconds of CPU where a unit test takes milliseconds; the unit tier (`-m "not
    integration"`) leaves it out so that it stays under a minute, the full suite runs it."""
    return None


@pytest.fixture(scope="module")
def ray_local():
    """A local Ray for one test module (never a cluster that happens to run on this machine).
    Not one head for the whole run: the orchestrator tests that run between two such modules
    kill nodes and raylets, and a head shared across them was found lost by the next module."""
    import ray

    ray.init(address="local", num_cpus=3, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="session")
def demo_sweep(tmp_path_factory, docker_client, sandbox_image):
    """The demo sweep (`heuristic` and `noop` on the four demo tasks, real Docker and Ray), run
    once per test process and read by every file whose trials it already runs
    (tests/helpers/shared_runs.py): a `DemoSweep` of its config, result and rows. Its output is
    read, never written; a test that resumes or writes works on `demo_sweep.copy(tmp_path)`. It
    joins the Ray of a module that started one, else starts its own for the sweep alone."""
    from tests.helpers.shared_runs import run_demo_sweep

    return run_demo_sweep(tmp_path_factory.mktemp("demo-sweep"))


@pytest.fixture(scope="session")
def adversary_runs(request, sandbox_image, tmp_path_factory):
    """The adversarial files' agents (each file's `ADVERSARY_GROUP`, tests/helpers/adversaries.py),
    every collected file's run once per test process as one batch of trials two at a time:
    {sweep_id: GroupRun}. A file reads its own group's; outputs are read, never written, but by
    the file whose group delivered there."""
    from tests.helpers.adversaries import collected_groups, run_groups

    return run_groups(collected_groups(request.session.items), sandbox_image, tmp_path_factory.mktemp("adversaries"))


@pytest.fixture
def real_key(monkeypatch) -> str:
    """The fake "real" LLM key (`REAL_KEY`), in the driver's environment only, under
    `REAL_KEY_ENV` (the proxy reads it from there; a sweep's agent names it as its `key_env`).
    Its `sk-REALKEY-` prefix is what the leak searches look for."""
    from reb_ray.testing.llm_session import REAL_KEY, REAL_KEY_ENV

    monkeypatch.setenv(REAL_KEY_ENV, REAL_KEY)
    return REAL_KEY


@pytest.fixture(scope="session")
def installed_toolchain(docker_client, sandbox_image):
    """This node's toolchain (Toolchain.current()) with codex, claude_code and mini_swe_agent:
    about 50 s and 1.7 GB the first time on a node, a no-op afterwards."""
    from reb_ray.agents.toolchain import Toolchain
    from reb_ray.agents.toolchain_install import install

    toolchain = Toolchain.current()
    install(["codex", "claude_code", "mini_swe_agent"], toolchain, image=sandbox_image, client=docker_client)
    return toolchain
