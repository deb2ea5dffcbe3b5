"""The probing tests' one CPU-torch environment.

C2's probe (tests/probing/test_c2_probe.py) and C4's ranks (tests/probing/test_multi_gpu.py) need
a venv with real torch in a real Docker sandbox whose network is off. Installing it is the
expensive part of both files (the CPU torch wheel and its dependencies from the node's wheel
directories), so it is installed once per test process (`torch_image`, under pytest-xdist once
per worker) into an image that each file's sandbox starts from, and that image is removed at
the session's end.

The install runs in a plain container of the sandbox image (network off, the wheel directories
read-only), not a reb-ray sandbox: it carries none of reb-ray's labels, so no test that counts
managed containers or images sees it. pip does not byte-compile (most of torch's files are never
imported here); one `import torch` and `import torch.distributed.run` then write the bytecode of
what the tests load, as a user's first run would, so every probe (which runs with `-B` and
writes none) starts from the same environment.
"""

from __future__ import annotations

import os
import uuid

import pytest

WHEELS = "/opt/wheels"  # the CPU torch wheel
DEPS = "/opt/pypi/files"  # torch's pure-Python dependencies (filelock, sympy, ...)
TORCH_WHEEL = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
#: Where the venv is in the image.
TORCH_VENV = "/opt/envs/torch"
TORCH_PY = f"{TORCH_VENV}/bin/python"


@pytest.fixture(scope="session")
def torch_image(docker_client, sandbox_image) -> str:
    """The sandbox image with TORCH_VENV holding torch 2.13.0+cpu and its dependencies: its id."""
    assert os.path.isfile(f"{WHEELS}/{TORCH_WHEEL}"), f"{WHEELS}/{TORCH_WHEEL} is missing: the node's wheelhouse has no CPU torch"
    assert os.path.isdir(DEPS), f"{DEPS} is missing: torch's dependencies are not on this node"
    install = (f"python3 -m venv --without-pip {TORCH_VENV} && python3 -m pip --python {TORCH_PY} install -q "
               f"--no-index --no-compile --find-links {WHEELS} --find-links {DEPS} torch==2.13.0 && "
               f"{TORCH_PY} -c 'import torch, torch.distributed.run'")
    container = docker_client.containers.run(
        sandbox_image, ["bash", "-c", install], detach=True, network_mode="none",
        volumes={WHEELS: {"bind": WHEELS, "mode": "ro"}, DEPS: {"bind": DEPS, "mode": "ro"}})
    try:
        status = container.wait(timeout=900)["StatusCode"]
        assert status == 0, container.logs()[-3000:].decode(errors="replace")
        image = container.commit(repository="reb-ray-test/torch", tag=uuid.uuid4().hex[:12],
                                 changes=['CMD ["sleep", "infinity"]'])
    finally:
        container.remove(force=True)
    yield image.id
    docker_client.images.remove(image.id, force=True)


#: Where the probing tests that share one sandbox write (the repository, environments, sources
#: and the toolbox, scratch, pip's cache in root's home).
WRITTEN = ("/work", "/opt", "/tmp", "/root")


def sandbox_state(sb, roots: tuple[str, ...] = WRITTEN) -> str:
    """Every path under `roots` in the sandbox, its type and mode; a file's size and mtime too."""
    where = " ".join(roots)
    res = sb.exec(["bash", "-c", f"{{ find {where} -mindepth 1 -type d -printf '%p\\t%y %m\\n'; "
                                 f"find {where} -mindepth 1 ! -type d -printf '%p\\t%y %m %s %T@\\n'; }} | sort"],
                  timeout=120)
    assert res.ok, res.output[-2000:]
    return res.output


def put_back(sb, fresh: str, roots: tuple[str, ...] = WRITTEN) -> None:
    """Put a shared sandbox back as it was when `fresh = sandbox_state(sb)` was taken: what was
    added under `roots` since is removed; a test that changed what was there fails here."""
    known = {line.split("\t")[0] for line in fresh.splitlines()}
    added = sorted(p for p in (line.split("\t")[0] for line in sandbox_state(sb, roots).splitlines()) if p not in known)
    top = [p for i, p in enumerate(added) if not any(p.startswith(q + "/") for q in added[:i])]
    if top:
        res = sb.exec(["rm", "-rf", "--", *top], timeout=120)
        assert res.ok, res.output[-2000:]
    assert sandbox_state(sb, roots) == fresh, "the shared sandbox could not be put back as it was"


@pytest.fixture(scope="module")
def toolbox_ready():
    """Build (or find) the node's cached toolbox once for the module."""
    from reb_ray.probing.toolbox import toolbox_dir, toolbox_tar

    toolbox_dir()
    return toolbox_tar()


@pytest.fixture(scope="module")
def module_sandbox(request, sandbox_image, toolbox_ready):
    """The module's sandbox (networking off) and its state when it started."""
    from reb_ray.sandbox import SandboxConfig, open_sandbox

    name = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    config = SandboxConfig(image=sandbox_image, network="none", sweep_id="test", trial_id=f"{name}-module")
    with open_sandbox("docker", config) as sb:
        yield sb, sandbox_state(sb)


@pytest.fixture
def sandbox(module_sandbox):
    """The module's sandbox as it started: what an earlier test wrote is gone."""
    sb, fresh = module_sandbox
    put_back(sb, fresh)
    return sb
