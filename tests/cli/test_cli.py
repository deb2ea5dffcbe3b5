"""The real `reb-ray` console script: version, doctor, bad input as one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.cli.in_process import run_cli

# The console script of the interpreter running the tests (PATH may not include the venv).
REB_RAY = str(Path(sys.executable).with_name("reb-ray"))


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """The command in this process (tests.cli.in_process); test_version runs the console script."""
    return run_cli(*args, env=env)


def test_version():
    from reb_ray import __version__

    script = subprocess.run([REB_RAY, "--version"], capture_output=True, text=True, timeout=300)
    assert script.stdout.strip() == run("--version").stdout.strip() == f"reb-ray {__version__}"


def test_unknown_profile_is_one_line_with_valid_names():
    res = run("image", "build", "--profile", "cuda11")
    assert res.returncode == 2
    assert res.stderr.strip() == "error: unknown image profile 'cuda11'; valid: minimal, paper"


def test_an_output_that_cannot_take_files_is_one_line_before_anything_runs(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("not a directory")
    for output in (afile, afile / "below", Path("/proc/reb-ray-nope")):
        res = run("sweep", "--agents", "noop", "--tasks", "numpy-trainer", "--output", str(output))
        assert res.returncode != 0 and res.stderr.strip().count("\n") == 0, res.stderr
        assert res.stderr.startswith(f"error: --output {output}: cannot write results there"), res.stderr


def test_doctor_reports_each_part(sandbox_image):
    res = run("doctor")
    assert res.returncode == 0, res.stdout + res.stderr
    for name in ("docker", "sandbox image", "gpus", "nvidia runtime", "ray", "pyright", "disk"):
        assert name in res.stdout
    assert sandbox_image.split(":")[1] in res.stdout


def test_doctor_says_how_to_give_containers_gpus(sandbox_image, tmp_path):
    """Issue 9 item 9: this machine's Docker has no NVIDIA runtime. Without GPUs (no nvidia-smi)
    there is nothing to fix; on a node with GPUs (a stand-in nvidia-smi that lists one) a probe
    container with a GPU device request fails, and doctor prints the NVIDIA Container Toolkit
    install line."""
    plain = run("doctor")
    assert "no GPUs here (nvidia-smi not found): none needed" in plain.stdout
    assert not [ln for ln in plain.stdout.splitlines() if ln.startswith("fix nvidia runtime: ")]
    (tmp_path / "nvidia-smi").write_text("#!/bin/sh\necho '0, NVIDIA H200, 570.86.15'\n")
    (tmp_path / "nvidia-smi").chmod(0o755)
    res = run("doctor", env={"PATH": f"{tmp_path}:{os.environ['PATH']}"})
    assert "1: 0, NVIDIA H200, 570.86.15" in res.stdout  # the stand-in was the one asked
    assert "could not select device driver" in res.stdout  # the probe container's own error, not a guess
    (fix,) = [ln for ln in res.stdout.splitlines() if ln.startswith("fix nvidia runtime: ")]
    assert "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html" in fix
    assert "nvidia-ctk runtime configure --runtime=docker" in fix


def test_doctor_without_daemon_fails_with_the_fix():
    res = run("doctor", env={"DOCKER_HOST": "unix:///nonexistent/docker.sock"})
    assert res.returncode == 1
    assert "dockerd" in res.stdout and "fail" in res.stdout


def test_sandbox_reap_runs(docker_client):
    res = run("sandbox", "reap")
    assert res.returncode == 0 and "removed" in res.stdout


def test_report_and_regrade_on_a_missing_directory_are_one_line(tmp_path):
    for command in ("report", "regrade"):
        res = run(command, str(tmp_path / "nowhere"))
        assert res.returncode == 2 and res.stderr.count("\n") == 1 and "no trials/ dataset" in res.stderr


def test_usage_errors_are_one_line_exit_2_never_a_traceback():
    cases = {
        ("swep",): "error: No such command 'swep'. Did you mean 'sweep'? (see: reb-ray --help)",
        ("report",): "error: Missing argument 'run_dir'. (see: reb-ray report --help)",
        ("sweep", "--agents", ""): "error: flags: --agents = []: List should have at least 1 item after validation, not 0",
    }
    for args, expected in cases.items():
        res = run(*args)
        assert (res.returncode, res.stderr.strip()) == (2, expected), (args, res.stderr)
        assert "Traceback" not in res.stdout + res.stderr
    res = run("sweep", "--trails", "2")
    assert res.returncode == 2 and res.stderr.startswith("error: No such option: --trails")
    assert res.stderr.strip().endswith("(see: reb-ray sweep --help)") and len(res.stderr.strip().splitlines()) == 1
    res = run("sweep", "--trials", "abc")
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1 and "'--trials'" in res.stderr


def test_doctor_says_whether_the_host_guard_can_be_installed(tmp_path):
    """Docker sandboxes need iptables as root (reb_ray/netpolicy/hostguard.py): doctor says so
    before a sweep fills with infra rows. Without iptables on PATH it fails with the fix."""
    here = {"PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    ok = run("doctor", env=here)
    assert "host guard" in ok.stdout and "iptables usable" in ok.stdout
    bare = tmp_path / "bin"
    bare.mkdir()
    for tool in ("docker", "nvidia-smi", "node"):  # what the other checks may call; no iptables
        found = subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True, text=True).stdout.strip()
        if found:
            (bare / tool).symlink_to(found)
    missing = run("doctor", env={**here, "PATH": f"{bare}:{Path(sys.executable).parent}"})
    assert missing.returncode != 0 and "iptables not found" in missing.stdout
    assert any(line.startswith("fix host guard: ") for line in missing.stdout.splitlines())


def test_no_help_page_shows_a_value_beside_a_plain_flag():
    """A flag takes no value, so its --help line names none (a typer release printed `<bool>`)."""
    import click
    import typer

    from reb_ray.cli import app

    def paths(command: click.Command, path: tuple[str, ...]):
        yield path
        for name, sub in getattr(command, "commands", {}).items():
            yield from paths(sub, (*path, name))

    pages = list(paths(typer.main.get_command(app), ()))
    assert len(pages) > 20  # every command and group, nested ones included
    for path in pages:
        res = run(*path, "--help", env={"COLUMNS": "200"})
        assert res.returncode == 0, (path, res.stderr)
        assert "<bool>" not in res.stdout, (path, [line for line in res.stdout.splitlines() if "<bool>" in line])
