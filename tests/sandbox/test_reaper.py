"""The reaper removes our containers whose owner died (F13), and nothing else."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import docker
import pytest

from reb_ray.sandbox import SandboxConfig
from reb_ray.sandbox.docker.docker_sandbox import DockerSandbox
from reb_ray.sandbox.ownership import MANAGED, OWNER_HOST, OWNER_PID, OWNER_START, Owner
from reb_ray.sandbox.docker.reaper import reap

OWNER_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from reb_ray.sandbox import SandboxConfig
    from reb_ray.sandbox.docker.docker_sandbox import DockerSandbox
    boxes = [DockerSandbox(SandboxConfig(image=sys.argv[1], sweep_id="doomed", trial_id=f"t{i}")) for i in range(3)]
    print(" ".join(b.id for b in boxes), flush=True)
    time.sleep(600)
    """
)


def test_reaper_removes_containers_of_a_sigkilled_owner_only(docker_client, sandbox_image):
    owner = subprocess.Popen([sys.executable, "-c", OWNER_SCRIPT, sandbox_image], stdout=subprocess.PIPE, text=True)
    try:
        orphan_ids = owner.stdout.readline().split()
        assert len(orphan_ids) == 3
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    foreign = docker_client.containers.run(sandbox_image, ["sleep", "infinity"], detach=True, labels={"someone.else": "1"})
    live = DockerSandbox(SandboxConfig(image=sandbox_image, sweep_id="alive"), docker_client)
    # Our label, our host, a pid that exists but started at another time: a recycled pid.
    me = Owner.current()
    recycled = docker_client.containers.run(
        sandbox_image, ["sleep", "infinity"], detach=True,
        labels={MANAGED: "true", OWNER_HOST: me.host, OWNER_PID: str(os.getpid()), OWNER_START: str((me.start_ticks or 0) + 1)},
    )
    try:
        removed = set(reap(docker_client))
        assert set(orphan_ids) | {recycled.id} == removed
        remaining = {c.id for c in docker_client.containers.list(all=True)}
        assert foreign.id in remaining and live.id in remaining
        assert not (set(orphan_ids) & remaining)
    finally:
        foreign.remove(force=True)
        live.close()
        for container_id in [recycled.id, *orphan_ids]:
            try:
                docker_client.api.remove_container(container_id, force=True)
            except Exception:
                pass


def test_concurrent_removals_of_one_container_are_not_errors(docker_client, sandbox_image):
    """Two reapers (or a reaper and the trial's own close) removing one container at once: Docker
    answers the later ones 409 "removal already in progress"; that is done, not a crash."""
    import threading

    from reb_ray.sandbox.docker.reaper import _remove

    for _ in range(2):
        container = docker_client.containers.run(sandbox_image, ["sh", "-c", "head -c 200000000 /dev/urandom > /big; sleep 100"],
                                                 detach=True, labels={"reb-ray.test": "reaper-race"})
        try:
            for _wait in range(100):  # until the writable layer holds the file (a slower removal)
                if container.exec_run(["sh", "-c", "test -f /big && sleep 0.5"]).exit_code == 0:
                    break
            handles = [docker_client.containers.get(container.id) for _ in range(4)]
            errors, removed = [], []
            threads = [threading.Thread(target=lambda h=h: _try(lambda: removed.extend(_remove([h])), errors)) for h in handles]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert errors == [] and removed
        finally:
            for leftover in docker_client.containers.list(all=True, filters={"label": "reb-ray.test=reaper-race"}):
                leftover.remove(force=True)


def test_a_sandbox_closed_while_a_reaper_removes_it_is_gone_when_close_returns(docker_client, sandbox_image):
    """A trial's close that finds its container's removal already begun by someone else (a
    sweep's start-up reaper) waits for that removal: once close returns, the container is gone."""
    import threading

    from docker.errors import NotFound

    from reb_ray.sandbox.docker.reaper import _remove

    for _ in range(2):
        sandbox = DockerSandbox(SandboxConfig(image=sandbox_image, trial_id="close-race", labels={"reb-ray.test": "close-race"}))
        try:
            sandbox.exec(["sh", "-c", "head -c 300000000 /dev/urandom > /big"], timeout=120)  # a slower removal
            foreign = threading.Thread(target=_remove, args=([docker_client.containers.get(sandbox.id)],))
            foreign.start()
            time.sleep(0.05)  # the other removal is under way
            sandbox.close()
            with pytest.raises(NotFound):
                docker_client.api.inspect_container(sandbox.id)
            foreign.join()
        finally:
            for leftover in docker_client.containers.list(all=True, filters={"label": "reb-ray.test=close-race"}):
                leftover.remove(force=True)


def _try(fn, errors: list) -> None:
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - collected for the assertion
        errors.append(repr(exc)[:200])


def test_reap_images_removes_per_attempt_images_of_dead_owners_only(docker_client, sandbox_image):
    """An image committed from one of our containers carries its labels: it is reaped once its
    owner is gone; one of a live owner, and the sandbox image itself, stay."""
    import docker

    from reb_ray.sandbox.ownership import container_labels, process_start_ticks
    from reb_ray.sandbox.docker.reaper import reap_images

    gone = subprocess.Popen(["sleep", "60"])
    dead = Owner(os.uname().nodename, gone.pid, process_start_ticks(gone.pid))
    gone.kill()
    gone.wait()
    labels = {**container_labels("img-reap", "noop/t/0", 1), **dead.labels()}
    dead_box = docker_client.containers.create(sandbox_image, ["true"], labels=labels)
    live_box = docker_client.containers.create(sandbox_image, ["true"], labels=container_labels("img-reap", "noop/t/1", 1))
    tags = [f"reb-ray-test/attempt:dead-{os.getpid()}", f"reb-ray-test/attempt:live-{os.getpid()}"]
    try:
        dead_image = dead_box.commit(*tags[0].split(":"))
        live_image = live_box.commit(*tags[1].split(":"))
        dead_box.remove(force=True)
        assert dead_image.id in reap_images(docker_client)
        with pytest.raises(docker.errors.ImageNotFound):
            docker_client.images.get(tags[0])
        assert docker_client.images.get(tags[1]).id == live_image.id
        docker_client.images.get(sandbox_image)
    finally:
        live_box.remove(force=True)
        for tag in tags:
            try:
                docker_client.images.remove(tag, force=True)
            except docker.errors.ImageNotFound:
                pass


def test_reaper_removes_per_attempt_images_of_a_dead_owner_only(docker_client, sandbox_image):
    """Issue 12, item 5: a GPU-sharing trial killed between its commit and its cleanup leaves an
    image labelled as its attempt's; the reaper removes it, never a live owner's."""
    from reb_ray.sandbox.ownership import ATTEMPT_IMAGE

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    box = DockerSandbox(SandboxConfig(image=sandbox_image, sweep_id="image-reap", trial_id="t"), docker_client)
    try:
        dead = docker_client.api.commit(box.id, repository="reb-ray/attempt", tag="reap-dead",
                                        changes=[f"LABEL {ATTEMPT_IMAGE}=true", f"LABEL {OWNER_PID}={gone.pid}"])["Id"]
        live = docker_client.api.commit(box.id, repository="reb-ray/attempt", tag="reap-live",
                                        changes=[f"LABEL {ATTEMPT_IMAGE}=true"])["Id"]
        removed = reap(docker_client)
        assert dead in removed and live not in removed
        remaining = {i.id for i in docker_client.images.list(filters={"label": f"{ATTEMPT_IMAGE}=true"})}
        assert live in remaining and dead not in remaining
    finally:
        box.close()
        for tag in ("reap-dead", "reap-live"):
            try:
                docker_client.images.remove(f"reb-ray/attempt:{tag}", force=True)
            except docker.errors.NotFound:
                pass


def test_a_kept_environment_is_never_reaped_even_with_a_dead_owner(docker_client, sandbox_image):
    """An image labelled as a kept environment outlives its owner, whatever its owner labels say."""
    from reb_ray.sandbox.ownership import KEPT_ENV, container_labels, process_start_ticks
    from reb_ray.sandbox.docker.reaper import reap_images

    gone = subprocess.Popen(["sleep", "60"])
    dead = Owner(os.uname().nodename, gone.pid, process_start_ticks(gone.pid))
    gone.kill()
    gone.wait()
    labels = {**container_labels("img-keep", "heuristic/t/0", 1), **dead.labels()}
    box = docker_client.containers.create(sandbox_image, ["true"], labels=labels)
    tags = [f"reb-ray-test/kept:{os.getpid()}", f"reb-ray-test/notkept:{os.getpid()}"]
    try:
        kept = box.commit(*tags[0].split(":"), changes=[f"LABEL {KEPT_ENV}=true"])
        other = box.commit(*tags[1].split(":"))
        box.remove(force=True)
        removed = reap_images(docker_client)
        assert other.id in removed and kept.id not in removed
        assert docker_client.images.get(tags[0]).id == kept.id
    finally:
        for tag in tags:
            try:
                docker_client.images.remove(tag, force=True)
            except docker.errors.ImageNotFound:
                pass


def test_removing_a_dead_attempt_spares_the_same_attempt_of_another_sweep_run(docker_client, sandbox_image):
    """Two sweeps of one configuration into two output directories share the sweep id, trial
    ids and attempt numbers on one daemon; their containers differ only in `reb-ray.run`.
    Removing one run's dead attempt removes its container and never the other run's."""
    import uuid

    from reb_ray.sandbox.ownership import RUN
    from reb_ray.sandbox.docker.reaper import remove_attempt

    sweep = f"same-config-{uuid.uuid4().hex[:6]}"
    boxes = {run: DockerSandbox(SandboxConfig(image=sandbox_image, sweep_id=sweep, trial_id="noop/t/0", attempt=1,
                                              labels={RUN: run}), docker_client)
             for run in ("run-a", "run-b")}
    try:
        assert remove_attempt(sweep, "noop/t/0", 1, docker_client, run_id="run-a") == [boxes["run-a"].id]
        left = docker_client.containers.list(all=True, filters={"label": f"reb-ray.sweep={sweep}"})
        assert [c.id for c in left] == [boxes["run-b"].id] and left[0].status == "running"
        assert left[0].labels[RUN] == "run-b"
    finally:
        for box in boxes.values():
            box.close()


def test_an_image_removed_while_the_reaper_lists_is_skipped_not_an_error(docker_client, sandbox_image):
    """Two sweeps on one daemon: sweep B's start-up reaper listed the attempt images, then sweep
    A removed one of them (its own close or reaper) before B inspected it. B's listing is
    replayed here as it was (taken before the removal, every image on it real); B reaps the rest
    and starts, where the SDK's `images.list` raised ImageNotFound and ended B's sweep."""
    from reb_ray.sandbox.docker.reaper import orphaned_images, reap_images
    from reb_ray.sandbox.ownership import ATTEMPT_IMAGE, TRIAL

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    box = DockerSandbox(SandboxConfig(image=sandbox_image, sweep_id="stale-list", trial_id="t"), docker_client)
    labels = [f"LABEL {ATTEMPT_IMAGE}=true", f"LABEL {MANAGED}=true", f"LABEL {TRIAL}=stale/t/0",
              f"LABEL {OWNER_PID}={gone.pid}", f"LABEL {OWNER_HOST}={os.uname().nodename}"]
    try:
        ids = [docker_client.api.commit(box.id, repository="reb-ray/attempt", tag=f"stale-{i}",
                                        changes=[*labels, f"LABEL stale.index={i}"])["Id"] for i in range(2)]
        listing = [i for i in docker_client.api.images(filters={"label": [f"{MANAGED}=true", TRIAL]})
                   if i["Id"] in ids]
        assert sorted(i["Id"] for i in listing) == sorted(ids)
        docker_client.images.remove(ids[0], force=True)  # the other sweep got there first

        class ListedBefore(docker.APIClient):
            """The daemon's API, but its image listing is the one taken before the removal."""

            def images(self, *args, **kwargs):
                return listing

        stale = docker.from_env()
        stale.api = ListedBefore(**docker.utils.kwargs_from_env())
        with pytest.raises(docker.errors.ImageNotFound):  # what the SDK's own listing does
            stale.images.list(filters={"label": [f"{MANAGED}=true", TRIAL]})
        assert [i.id for i in orphaned_images(stale)] == [ids[1]]
        assert reap_images(stale) == [ids[1]]
    finally:
        box.close()
        for i in range(2):
            try:
                docker_client.images.remove(f"reb-ray/attempt:stale-{i}", force=True)
            except docker.errors.NotFound:
                pass
