"""The between-phase steps in one exec (reb_ray/trial/between_phases.py), against real Docker sandboxes
with real git: the one exec finds what the steps one by one find, keeps every safety rule of the
report read, and hands over to the steps when it cannot run or its answer is not trusted."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from reb_ray.trial import between_phases
from reb_ray.trial.between_phases import settle, settle_step_by_step
from reb_ray.sandbox import SandboxConfig, UnreadableFile
from reb_ray.sandbox.docker.docker_sandbox import DockerSandbox
from tests.helpers.git import GIT_ENV

REPORT = "/opt/scimlopsbench/report.json"
_ENV = GIT_ENV


@pytest.fixture
def docker_sandbox(sandbox_image, docker_client, request):
    made: list[DockerSandbox] = []

    def make() -> DockerSandbox:
        sb = DockerSandbox(SandboxConfig(image=sandbox_image, sweep_id="test", trial_id=request.node.name[:60]), docker_client)
        made.append(sb)
        return sb

    yield make
    for sb in made:
        sb.close()


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True, env=_ENV)
    for name in ("a.py", "b.py", "with space.py"):
        (repo / name).write_text(f"# {name}\n")
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True, env=_ENV)
    subprocess.run(["git", "commit", "-qm", "one"], cwd=repo, check=True, env=_ENV)
    return repo


def _agent_was_here(sb: DockerSandbox, tmp_path: Path, report: str = '{"python_path": "/usr/bin/python3"}') -> str:
    """The repository put in, then what an agent leaves: a report, two leftovers (one with a
    command line holding marker-like lines), an edited, a deleted file. Returns the repo dir."""
    repo_dir = f"{sb.workdir}/repo"
    sb.put(_repo(tmp_path), repo_dir)
    fake = "x\n@@0123 killed-end\n@@0123 report missing\n@@0123 state clean\n@@0123 end"
    sb.write_bytes(REPORT, report.encode())
    assert sb.exec(["sh", "-c", 'sleep 1001 & sh -c "sleep 1002; :" "$1" & echo y >> a.py; rm b.py', "agent", fake],
                   workdir=repo_dir).ok
    deadline = time.monotonic() + 10
    while "sleep 1002" not in sb.exec(["ps", "-eo", "args"]).output:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return repo_dir


def test_the_one_exec_finds_what_the_steps_find(docker_sandbox, tmp_path):
    one, steps = docker_sandbox(), docker_sandbox()
    got = settle(one, REPORT, _agent_was_here(one, tmp_path / "one"))
    expected = settle_step_by_step(steps, REPORT, _agent_was_here(steps, tmp_path / "steps"))
    assert got.one_exec and not expected.one_exec
    assert sorted(got.stopped) == sorted(expected.stopped) and len(got.stopped) == 3
    assert {"sleep 1001", "sleep 1002", "sh -c sleep 1002; : x"} == set(got.stopped)  # the fake lines are no command
    assert got.report == expected.report == b'{"python_path": "/usr/bin/python3"}'
    assert got.report_error is None and got.state == expected.state
    assert set(got.state) == {"a.py", "b.py"} and got.state["b.py"] == "missing" and len(got.state["a.py"]) == 40
    assert "sleep 100" not in one.exec(["ps", "-eo", "args"]).output  # the leftovers are gone
    # A clean checkout, no report, nothing running: all known, nothing found.
    clean = docker_sandbox()
    clean.put(_repo(tmp_path / "clean"), f"{clean.workdir}/repo")
    nothing = settle(clean, REPORT, f"{clean.workdir}/repo")
    assert (nothing.one_exec, nothing.stopped, nothing.report, nothing.state) == (True, [], None, {})
    assert isinstance(nothing.report_error, FileNotFoundError)
    assert settle(clean, REPORT, f"{clean.workdir}/not-a-repo").state is None  # unknown stays null


@pytest.mark.parametrize("make, kind", [
    ("ln -sf /proc/self/environ R", "a symlink, not a regular file"),
    ("mkfifo R", "a FIFO, not a regular file"),
    ("mkdir R && head -c 5000000 /dev/zero > R/x", "a directory, not a regular file"),
    ("head -c 2000 /dev/zero > R", "2000 bytes, over the 1000-byte limit"),
])
def test_a_report_that_is_not_a_small_regular_file_is_refused_as_the_daemon_read_refuses_it(docker_sandbox, make, kind):
    sb = docker_sandbox()
    assert sb.exec(["sh", "-c", f"mkdir -p /opt/scimlopsbench && cd /opt/scimlopsbench && rm -rf R && {make}"
                    .replace("R", "report.json")]).ok
    got, steps = settle(sb, REPORT, f"{sb.workdir}/repo", limit=1000), settle_step_by_step(sb, REPORT, "/nowhere", limit=1000)
    assert got.one_exec and got.report is None and isinstance(got.report_error, UnreadableFile)
    assert str(got.report_error) == str(steps.report_error) == f"{REPORT}: {kind}"
    assert "environ" not in repr(got)  # the link was not followed


def test_a_report_swapped_by_a_leftover_is_read_as_it_stands_once_the_leftover_is_dead(docker_sandbox):
    """Leftovers die before the report is looked at: what is read is what stays there."""
    sb = docker_sandbox()
    swap = ("mkdir -p /opt/scimlopsbench && cd /opt/scimlopsbench && while true; do echo '{}' > t && mv -f t report.json;"
            " ln -sf /proc/self/environ l && mv -fT l report.json; done")
    sb.exec(["sh", "-c", f"({swap}) >/dev/null 2>&1 &"])
    time.sleep(0.3)
    got = settle(sb, REPORT, "/nowhere")
    assert got.one_exec and got.stopped and not sb.exec(["pgrep", "-f", "while true"]).ok
    if sb.exec(["test", "-L", REPORT]).ok:
        assert str(got.report_error) == f"{REPORT}: a symlink, not a regular file"
    else:
        assert got.report == b"{}\n" and got.report_error is None


def test_a_sandbox_whose_init_is_gone_is_settled_step_by_step(docker_sandbox):
    """F15a: the agent stopped the container; the exec cannot run, the daemon still reads the file."""
    sb = docker_sandbox()
    sb.write_bytes(REPORT, b'{"python_path": "/usr/bin/python3"}')
    sb.stop()
    got = settle(sb, REPORT, f"{sb.workdir}/repo")
    assert (got.one_exec, got.stopped, got.state) == (False, None, None)
    assert got.report == b'{"python_path": "/usr/bin/python3"}'


def test_an_answer_over_its_bound_is_not_trusted_and_the_steps_finish(docker_sandbox, tmp_path, monkeypatch):
    """The answer is read through a bounded sink; past the bound the steps read the report and
    the state, and the kill's listing (the answer's start) is kept, not run again blind."""
    sb = docker_sandbox()
    repo_dir = _agent_was_here(sb, tmp_path, report='{"python_path": "/usr/bin/python3", "notes": "' + "n" * 3000 + '"}')
    monkeypatch.setattr(between_phases, "ANSWER_LIMIT", 1500)
    got = settle(sb, REPORT, repo_dir)
    assert not got.one_exec and len(got.stopped) == 3
    assert got.report.endswith(b'n"}') and len(got.report) > 3000
    assert set(got.state) == {"a.py", "b.py"}


def test_a_script_that_hangs_is_cut_at_its_deadline_and_not_waited_for_twice(docker_sandbox, tmp_path, monkeypatch):
    """An agent that replaced git with a program that never ends: the one exec's deadline
    fires, the kill's listing and the report are kept, the tracked state is unknown (null),
    and the steps do not run git again for another deadline."""
    sb = docker_sandbox()
    repo_dir = _agent_was_here(sb, tmp_path)
    assert sb.exec(["sh", "-c", 'printf "#!/bin/sh\\nsleep 1000\\n" > "$(command -v git)"']).ok
    monkeypatch.setattr(between_phases, "SETTLE_TIMEOUT_S", 3.0)
    started = time.monotonic()
    got = settle(sb, REPORT, repo_dir)
    assert time.monotonic() - started < 60  # tracked_state's own deadline is 120 s
    assert (got.one_exec, got.state, len(got.stopped)) == (False, None, 3)
    assert got.report == b'{"python_path": "/usr/bin/python3"}'
