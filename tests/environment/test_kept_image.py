"""A kept or rebuilt environment runs with plain Docker (`docker run --rm TAG ...`) and says in
its labels what it is.

The sandbox's host mounts (the CA bundle file, the pip cache, the wheelhouse) used to be given
to the Docker SDK as `volumes`, which also declares them as the container's `Volumes`; `docker
commit` copied those into the kept image, and a plain `docker run -it TAG bash` then failed
with "cannot mount volume over existing file" (exit 125)."""

from __future__ import annotations

import subprocess
import uuid

from reb_ray.environment.keep import identity_labels
from reb_ray.sandbox.base import SandboxConfig
from reb_ray.sandbox.docker.docker_sandbox import binds_as_mounts, container_create_kwargs


def test_host_mounts_are_given_as_mounts_not_volumes(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    (tmp_path / "wheels").mkdir()
    config = SandboxConfig(image="x", mounts={str(tmp_path / "wheels"): "/wheels"},
                           rw_mounts={str(tmp_path / "pip"): "/root/.cache/pip"}, ca_bundle=str(ca))
    kwargs = binds_as_mounts(container_create_kwargs(config, "n"))
    assert "volumes" not in kwargs
    mounts = {m["Target"]: (m["Source"], m["ReadOnly"], m["Type"]) for m in kwargs["mounts"]}
    assert mounts["/wheels"] == (str(tmp_path / "wheels"), True, "bind")
    assert mounts["/root/.cache/pip"] == (str(tmp_path / "pip"), False, "bind")
    assert (tmp_path / "pip").is_dir()  # made, as a bind would have made it
    assert any(source == str(ca) and read_only for source, read_only, _ in mounts.values())


def test_the_labels_say_task_agent_trial_and_version():
    from reb_ray import __version__

    labels = identity_labels("claude_code@sonnet/numpy-trainer/2", 1)
    assert (labels["reb-ray.task"], labels["reb-ray.agent"], labels["reb-ray.trial-index"], labels["reb-ray.version"]) \
        == ("numpy-trainer", "claude_code@sonnet", "2", __version__)
    assert "agent claude_code@sonnet on task numpy-trainer" in labels["org.opencontainers.image.description"]


def _inspect(tag: str) -> tuple[dict | None, dict]:
    import json

    out = subprocess.run(["docker", "image", "inspect", tag], capture_output=True, text=True, check=True).stdout
    config = json.loads(out)[0]["Config"]
    return config.get("Volumes"), config.get("Labels") or {}


def test_a_kept_environment_runs_with_plain_docker(kept_heuristic):
    row = kept_heuristic.heuristic
    assert row["env_kept"], row
    tag = row["env_image_tag"]
    volumes, labels = _inspect(tag)
    assert not volumes, volumes
    assert (labels["reb-ray.task"], labels["reb-ray.agent"], labels["reb-ray.trial"]) == \
        ("numpy-trainer", "heuristic", "heuristic/numpy-trainer/0"), labels
    assert labels["reb-ray.version"]
    ran = subprocess.run(["docker", "run", "--rm", tag, "true"], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr


def test_a_rebuilt_environment_runs_with_plain_docker_and_says_what_it_is(sandbox_image, tmp_path):
    """The rebuild's own `docker build` (reb_ray.sweep.env_verify.build), on a one-step recipe."""
    from reb_ray.sweep.env_verify import build

    (tmp_path / "Dockerfile").write_text(f"FROM {sandbox_image}\nRUN true\n")
    tag = f"reb-ray/env-verify:test-{uuid.uuid4().hex[:8]}"
    built, _, log = build(tmp_path, tag, no_cache=False, labels=identity_labels("noop/numpy-trainer/0", 1))
    try:
        assert built, log
        volumes, labels = _inspect(tag)
        assert not volumes and labels["reb-ray.task"] == "numpy-trainer", (volumes, labels)
        ran = subprocess.run(["docker", "run", "--rm", tag, "true"], capture_output=True, text=True, timeout=120)
        assert ran.returncode == 0, ran.stderr
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True)
