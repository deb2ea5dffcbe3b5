"""What the Docker engine shows of a sandbox from outside (`reb_ray.sandbox.docker.outside`):
the processes it started with, spared by recorded PID (never by name), and file hashes read
without any program of the sandbox (real Docker)."""

from __future__ import annotations

import subprocess
import time

import pytest

from reb_ray.sandbox.base import SandboxConfig, git_blob
from reb_ray.sandbox.docker import outside
from reb_ray.sandbox.docker.docker_sandbox import DockerSandbox


@pytest.fixture
def box(sandbox_image):
    sb = DockerSandbox(SandboxConfig(image=sandbox_image, workdir="/work"))
    yield sb
    sb.close()


@pytest.fixture(params=["docker", "podman"])
def engine_box(request, sandbox_image):
    """A sandbox of each engine provider (Podman: the session's rootless service)."""
    from reb_ray.sandbox import open_sandbox

    if request.param == "podman":
        request.getfixturevalue("podman_service")
    sb = open_sandbox(request.param, SandboxConfig(image=sandbox_image, workdir="/work"), trusted=True)
    yield sb
    sb.close()


@pytest.mark.docker
def test_a_daemon_named_like_the_keep_alive_is_killed_and_the_keep_alive_spared(engine_box):
    """On both engines. The container's `ps` is replaced by one that hides everything: the
    listing is the engine's own reading of the processes (Podman's default would run that `ps`)."""
    box = engine_box
    box.exec(["sh", "-c", "for d in /usr/bin /bin; do [ -e $d/ps ] && rm -f $d/ps; done; "
                          "printf '#!/bin/sh\\necho UID PID PPID C STIME TTY TIME CMD\\n' > /usr/bin/ps && chmod 755 /usr/bin/ps"],
             timeout=30)
    own = box.process_table()
    assert len(own) == 2 and all(p.own for p in own)
    box.exec(["bash", "-c", "cd /tmp && printf 'while :; do sleep 1; done' > infinity && "
                            "setsid -f bash -c 'exec -a sleep bash infinity' </dev/null >/dev/null 2>&1"], timeout=30)
    deadline = time.monotonic() + 10
    while len(box.process_table()) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    disguised = [p for p in box.process_table() if not p.own]
    assert disguised and disguised[0].command.startswith("sleep infinity")
    assert "sleep infinity" in " ".join(box.kill_leftovers())
    assert [p.pid for p in box.process_table()] == [p.pid for p in own]
    assert box.exec("true", timeout=30).ok  # the keep-alive lives: the sandbox still runs commands


@pytest.mark.docker
def test_files_are_hashed_from_outside_by_both_routes_no_link_followed(box):
    box.exec(["sh", "-c", "mkdir -p /work/repo/d && printf x > /work/repo/a && ln -s a /work/repo/l && "
                          "echo hi > /work/repo/d/f && ln -s /etc /work/repo/e && mkdir /work/repo/dir"], timeout=30)
    paths = ["a", "l", "d/f", "dir", "missing", "e/passwd"]
    want = {"a": git_blob(b"x"), "l": git_blob(b"a"), "d/f": git_blob(b"hi\n"), "dir": None, "missing": None,
            "e/passwd": None}
    assert box.blobs_outside("/work/repo", paths) == want
    api = box.client.api
    assert outside._from_archive(api, box.id, "/work/repo", paths) == want
    git = subprocess.run(["git", "hash-object", "--stdin"], input=b"hi\n", capture_output=True, check=True)
    assert want["d/f"] == git.stdout.decode().strip()
