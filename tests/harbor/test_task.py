"""Reading Harbor tasks, mapping their base images, reading their rewards: pure rules on files the tests write."""

from __future__ import annotations

from pathlib import Path

import pytest

from reb_ray.harbor.images import map_image, mapped_dockerfile, parse_image_map, reference_forms, with_init
from reb_ray.harbor.task import HarborTaskError, find_harbor_tasks, load_harbor_task
from reb_ray.harbor.trial import parse_rewards

TOML = """version = "1.0"
[agent]
timeout_sec = 900.0
[verifier]
timeout_sec = 120.0
[verifier.env]
MODE = "strict"
[environment]
build_timeout_sec = 300.0
cpus = 2
memory_mb = 2048
storage_mb = 10240
gpus = 2
allow_internet = false
workdir = "/app"
"""


def write_task(root: Path, name: str = "t", toml: str = TOML, solve: bool = True) -> Path:
    task = root / name
    (task / "environment").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "task.toml").write_text(toml)
    (task / "instruction.md").write_text("Do the thing.\n")
    (task / "environment" / "Dockerfile").write_text("FROM python:3.12-slim\n")
    (task / "tests" / "test.sh").write_text("#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n")
    if solve:
        (task / "solution").mkdir()
        (task / "solution" / "solve.sh").write_text("#!/bin/sh\ntrue\n")
    return task


def test_task_toml_maps_to_the_run(tmp_path):
    task = load_harbor_task(write_task(tmp_path))
    assert (task.id, task.prompt) == ("t", "Do the thing.\n")
    assert (task.agent_timeout_s, task.verifier_timeout_s, task.build_timeout_s) == (900.0, 120.0, 300.0)
    assert (task.cpus, task.memory_mb, task.storage_mb, task.gpus) == (2, 2048, 10240, 2)
    assert task.internet is False and task.workdir == "/app"
    assert task.verifier_env == {"MODE": "strict"}
    assert task.solve == task.task_dir / "solution" / "solve.sh"


def test_defaults_are_harbors(tmp_path):
    task = load_harbor_task(write_task(tmp_path, toml="", solve=False))
    assert (task.agent_timeout_s, task.verifier_timeout_s, task.build_timeout_s) == (None, 600.0, 600.0)
    assert (task.cpus, task.memory_mb, task.gpus, task.internet, task.solve) == (None, None, 0, True, None)


@pytest.mark.parametrize("toml, message", [
    ('[environment]\nnetwork_mode = "no-network"\n', None),
    ('[environment]\nnetwork_mode = "allowlist"\nallowed_hosts = ["example.org"]\n', "per-host allow-list"),
    ('[environment]\ngpus = -1\n', "gpus = -1: must be a non-negative integer"),
    ('[environment]\nos = "windows"\n', "Linux tasks only"),
    ('[[steps]]\nname = "one"\n', "multi-step"),
    ('[environment\n', "TOML syntax error"),
])
def test_bad_or_unrunnable_tasks_are_one_line(tmp_path, toml, message):
    path = write_task(tmp_path, toml=toml)
    if message is None:
        assert load_harbor_task(path).internet is False
        return
    with pytest.raises(HarborTaskError) as err:
        load_harbor_task(path)
    text = str(err.value)
    assert message in text and str(path / "task.toml") in text and "\n" not in text


@pytest.mark.parametrize("compose", ["docker-compose.yaml", "docker-compose.yml"])
def test_compose_services_are_refused(tmp_path, compose):
    path = write_task(tmp_path)
    (path / "environment" / compose).write_text("services: {}\n")
    with pytest.raises(HarborTaskError, match=f"{compose}: extra compose services are not run by reb-ray"):
        load_harbor_task(path)


def test_a_directory_of_tasks_or_one_task(tmp_path):
    for name in ("b", "a"):
        write_task(tmp_path, name)
    (tmp_path / "_draft").mkdir()
    assert [t.id for t in find_harbor_tasks(tmp_path)] == ["a", "b"]
    assert [t.id for t in find_harbor_tasks(tmp_path / "b")] == ["b"]
    with pytest.raises(HarborTaskError, match="neither a Harbor task"):
        find_harbor_tasks(tmp_path / "_draft")


def test_reference_forms_strip_digest_and_registry():
    ref = "public.ecr.aws/docker/library/python:3.13-slim-bookworm@sha256:01f4"
    forms = reference_forms(ref)
    assert "python:3.13-slim-bookworm" in forms and "public.ecr.aws/docker/library/python:3.13-slim-bookworm" in forms
    assert reference_forms("python@sha256:8e53")[:2] == ["python@sha256:8e53", "python"]


@pytest.mark.parametrize("ref, expected", [
    ("python:3.11-bookworm", "local/py:1"),
    ("public.ecr.aws/docker/library/python:3.13-slim-bookworm@sha256:01f4", "local/py:1"),
    ("python@sha256:8e53", "local/python"),
    ("docker.io/library/ubuntu:24.04", "mirror:5000/library/ubuntu:24.04"),
    ("golang:1.22", "golang:1.22"),
])
def test_map_image(ref, expected):
    mapping = parse_image_map(["python:*=local/py:1", "python=local/python", "docker.io/=mirror:5000/"])
    assert map_image(ref, mapping) == expected


def test_image_map_option_needs_both_sides():
    with pytest.raises(ValueError, match="--image-map 'python': expected FROM-IMAGE=LOCAL-IMAGE"):
        parse_image_map(["python"])


def test_mapped_dockerfile_keeps_stage_names_and_flags():
    text = "FROM --platform=linux/amd64 golang:1.22 AS build\nRUN go build\nFROM build AS again\nFROM python:3.12\nCOPY --from=build /x /x\n"
    out, bases = mapped_dockerfile(text, {"golang:1.22": "local/go", "python:*": "local/py"})
    assert bases == ["local/go", "local/py"]
    assert out.splitlines()[0] == "FROM --platform=linux/amd64 local/go AS build"
    assert out.splitlines()[2] == "FROM build AS again"
    last = with_init(out, "reb-ray/sandbox:x").splitlines()
    assert last[-2:] == ["COPY --from=reb-ray/sandbox:x /usr/bin/tini-static /usr/local/bin/reb-ray-init",
                         'ENTRYPOINT ["/usr/local/bin/reb-ray-init", "--"]']


@pytest.mark.parametrize("json_text, txt, expected", [
    ('{"reward": 0.5, "c1": 1}', "0", ({"reward": 0.5, "c1": 1.0}, None)),
    (None, " 1\n", ({"reward": 1.0}, None)),
    (None, None, (None, "reward_missing")),
    ('{"reward": "high"}', None, (None, "reward_invalid")),
    ('{"reward": NaN}', None, (None, "reward_invalid")),
    (None, "inf", (None, "reward_invalid")),
    ("0.25", None, ({"reward": 0.25}, None)),
])
def test_rewards_are_read_as_harbor_reads_them(json_text, txt, expected):
    assert parse_rewards(json_text, txt) == expected
