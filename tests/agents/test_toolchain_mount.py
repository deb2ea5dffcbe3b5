"""The toolchain is in the sandbox for the agent phase only (real Docker, real mounts, real probes)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from reb_ray.agents.toolchain import AGENT_MOUNT, TOOLCHAIN_SANDBOX_PATH, Toolchain
from reb_ray.agents.toolchain_mount import ToolchainSlot, _mount, reap_slots
from reb_ray.models.sweep import SweepConfig, TrialSpec
from reb_ray.sandbox.ownership import OWNER_PID
from reb_ray.sandbox.scratch import place
from reb_ray.suite.load import load_suite
from reb_ray.sandbox import SandboxConfig, open_sandbox
from reb_ray.testing.suite import off, write_task

pytestmark = pytest.mark.docker


def _slot_mounts(root: Path | None = None) -> list[str]:
    """Slot mounts under toolchains root `root`, or (None) this process's slots anywhere: other
    sweeps on the machine may hold slots of their own meanwhile."""
    mark = f"{root}/.slots/" if root is not None else f"/.slots/{os.getpid()}-"
    return [line for line in Path("/proc/self/mountinfo").read_text().splitlines() if mark in line]


def test_the_slot_shows_the_toolchain_until_it_is_detached(tmp_path, sandbox_image):
    toolchain = Toolchain(tmp_path / "key")
    toolchain.ensure_root()
    slot = ToolchainSlot(toolchain).open()
    try:
        config = SandboxConfig(image=sandbox_image, sweep_id="test", trial_id="toolchain-slot", propagated_mounts=slot.mounts)
        with open_sandbox("docker", config) as sandbox:
            assert sandbox.exec(["ls", f"{TOOLCHAIN_SANDBOX_PATH}/bin"], timeout=30).output.split() == ["claude", "codex", "mini", "nexau", "node"]
            write = sandbox.exec(["touch", f"{TOOLCHAIN_SANDBOX_PATH}/bin/x"], timeout=30)
            assert write.exit_code != 0 and "Read-only file system" in write.output
            slot.detach()
            after = sandbox.exec(["sh", "-c", f"ls -A {TOOLCHAIN_SANDBOX_PATH} | wc -l; grep -c {AGENT_MOUNT}/toolchain /proc/self/mountinfo"], timeout=30)
            assert after.output.split() == ["0", "0"]
    finally:
        slot.close()
    assert _slot_mounts() == [] and not slot.slot.exists()
    assert (toolchain.path / "bin" / "node").is_file()  # the toolchain itself is untouched


def test_slots_of_dead_owners_are_released(tmp_path):
    toolchain = Toolchain(tmp_path / "key")
    toolchain.ensure_root()
    dead = subprocess.Popen(["true"])
    dead.wait()
    slot = tmp_path / ".slots" / f"{dead.pid}-1-deadbeef"
    (slot / "toolchain").mkdir(parents=True)
    _mount("mount", "--bind", str(slot), str(slot))
    _mount("mount", "--bind", "-o", "ro", str(toolchain.path), str(slot / "toolchain"))
    here = place()
    elsewhere = tmp_path / ".slots" / f"{dead.pid}-1-{'0' * 8 if here != '0' * 8 else '1' * 8}-feedbeef"
    (elsewhere / "toolchain").mkdir(parents=True)  # made in another PID namespace: its pid says nothing here
    dead_here = tmp_path / ".slots" / f"{dead.pid}-1-{here}-cafebabe"
    (dead_here / "toolchain").mkdir(parents=True)
    assert sorted(reap_slots(tmp_path)) == sorted([slot, dead_here])  # the old name without a place too
    assert not slot.exists() and _slot_mounts(tmp_path) == [] and (toolchain.path / "bin" / "node").is_file()
    assert not dead_here.exists() and elsewhere.is_dir()
    elsewhere.joinpath("toolchain").rmdir()
    elsewhere.rmdir()
    mine = ToolchainSlot(toolchain).open()
    try:
        assert reap_slots(tmp_path) == [] and mine.slot.exists()  # a live owner's slot stays
    finally:
        mine.close()
    assert _slot_mounts(tmp_path) == []


# The agent: proves the CLIs run in the agent phase, then reports either its own venv or (second
# agent) the toolchain's mini-swe-agent interpreter, which must be gone when the probes look.
_AGENT = r"""
set -e
echo "agent: node $(node --version)"
echo "agent: $(codex --version)"
echo "agent: $(claude --version)"
echo "agent: $(mini --help 2>&1 | grep -o 'mini-swe-agent version [0-9.]*')"
touch "$TC/x" 2>/dev/null && echo "agent: toolchain writable" || echo "agent: toolchain read-only"
if [ "$MODE" = toolchain-python ]; then
  py=$(ls -d "$TC"/mini_swe_agent-py*/bin/python | head -1); [ -x "$py" ] && echo "agent: $py exists"
else
  python3 -m venv /opt/envs/peek; py=/opt/envs/peek/bin/python
fi
mkdir -p "$(dirname "$1")"
printf '{"python_path": "%s", "python_version": null, "torch_version": null, "cuda_available": null, "gpu_count": null, "ddp_expected_ok": null, "env_tool": "venv", "env_name": "peek", "notes": null}' "$py" > "$1"
"""

# C1 of the probe task: what a probe sees of the toolchain (nothing), with the report's python.
_PEEK = ('echo "probe: entries=$(ls -A ' + TOOLCHAIN_SANDBOX_PATH + ' | wc -l)"; '
         'command -v node >/dev/null && echo "probe: node=found" || echo "probe: node=absent"; '
         'echo "probe: PATH=$PATH"; python -c "import sys; print(\'probe: sys.path=\' + \':\'.join(sys.path))"; python main.py')


@pytest.fixture
def peek_task(tmp_path):
    cpu = "\n".join([f"command = {json.dumps(_PEEK)}", "timeout_s = 120",
                     'success = { exit_code = 0, log_pattern = "probe: entries=0" }'])
    cpu_only = off("CPU only")
    write_task(tmp_path / "tasks", "peek", "toolchain-peek", category="1_cpu", header="c0_baseline_total = 0",
               cpu=cpu, single_gpu=cpu_only, multi_gpu=cpu_only, cuda=cpu_only,
               files={"main.py": "import json\nprint(json.dumps({'final': 'ok'}))\n"})
    (task,) = load_suite("peek", tmp_path / "tasks")
    return task


def _trial(task, sandbox_image, mode: str):
    from reb_ray.trial.run import run_trial

    spec = {"kind": "command", "command": ["sh", "-c", _AGENT, "agent", "{report_path}"],
            "env": {"MODE": mode, "TC": TOOLCHAIN_SANDBOX_PATH}}
    # keep_environments none: a kept image would outlive the test (keeping is not its subject)
    config = SweepConfig(agent_specs={"peek": spec}, agents=["peek"], wheelhouses=[], keep_environments="none")
    return run_trial(TrialSpec(sweep_id="test-toolchain", agent="peek", task=task, trial_index=0, config=config, image=sandbox_image))


def test_the_agent_runs_the_clis_and_the_probes_see_nothing_of_them(installed_toolchain, sandbox_image, peek_task, docker_client):
    outcome = _trial(peek_task, sandbox_image, "own-venv")
    row, stages = outcome.trial, {s["stage"]: s for s in outcome.stages}
    assert row["status"] == "scored" and row["failure_owner"] is None, row["failure_reason"]
    agent_out = stages["agent"]["log_head"]
    for seen in ("agent: node v24", "agent: codex-cli 0.171.0", "agent: 2.1.332 (Claude Code)",
                 "agent: mini-swe-agent version 2.4.6", "agent: toolchain read-only"):
        assert seen in agent_out, agent_out
    c1 = stages["c1"]["log_head"]
    assert row["c1_status"] == "success" and "probe: entries=0" in c1 and "probe: node=absent" in c1, c1
    probe_path = next(line for line in c1.splitlines() if line.startswith("probe: PATH="))
    probe_sys_path = next(line for line in c1.splitlines() if line.startswith("probe: sys.path="))
    assert AGENT_MOUNT not in probe_path and AGENT_MOUNT not in probe_sys_path
    c0 = json.loads(stages["c0"]["raw"])
    assert c0["search_paths"] and not any(AGENT_MOUNT in p for p in c0["search_paths"] + c0["search_paths_real"])
    assert row["env_size_bytes"] > 0 and row["env_size_bytes"] < 100e6  # the venv only, not the 1.7 GB toolchain
    mine = [p for p in (installed_toolchain.path.parent / ".slots").iterdir() if p.name.startswith(f"{os.getpid()}-")]
    assert _slot_mounts() == [] and mine == []
    # this process's containers of the sweep: a run killed earlier may have left its own behind
    # (run_trial reaps nothing; a sweep's start does)
    left = docker_client.containers.list(all=True, filters={"label": ["reb-ray.sweep=test-toolchain",
                                                                      f"{OWNER_PID}={os.getpid()}"]})
    assert left == [], ([(c.name, c.status, c.attrs.get("Created"), c.attrs.get("State")) for c in left], row["failure_reason"])


def test_an_interpreter_from_the_toolchain_is_gone_in_the_probe_phase(installed_toolchain, sandbox_image, peek_task):
    outcome = _trial(peek_task, sandbox_image, "toolchain-python")
    row, stages = outcome.trial, {s["stage"]: s for s in outcome.stages}
    assert row["report_python_path"].startswith(TOOLCHAIN_SANDBOX_PATH)
    assert f"agent: {row['report_python_path']} exists" in stages["agent"]["log_head"]
    assert row["c1_status"] == "failure" and row["env_size_bytes"] is None and row["failure_owner"] == "agent"
    assert _slot_mounts() == []


def test_agents_without_the_toolchain_get_no_mount(sandbox_image, peek_task, tmp_path):
    from reb_ray.trial.run import run_trial

    config = SweepConfig(agents=["noop"], wheelhouses=[], toolchains_dir=tmp_path / "toolchains", keep_environments="none")
    outcome = run_trial(TrialSpec(sweep_id="test-toolchain", agent="noop", task=peek_task, trial_index=0,
                                  config=config, image=sandbox_image))
    assert outcome.trial["status"] == "scored" and outcome.trial["agent_kind"] == "noop"
    assert not (tmp_path / "toolchains").exists()  # no slot, no toolchain directory, no mount


def test_a_sandbox_that_cannot_start_leaves_no_slot(peek_task, tmp_path):
    from reb_ray.trial.run import run_trial

    spec = {"kind": "command", "command": ["true"]}
    config = SweepConfig(agent_specs={"c": spec}, agents=["c"], wheelhouses=[], toolchains_dir=tmp_path / "toolchains")
    row = run_trial(TrialSpec(sweep_id="test-toolchain", agent="c", task=peek_task, trial_index=0, config=config,
                              image="reb-ray/sandbox:no-such-tag")).trial
    assert row["status"] == "infra_error" and "no-such-tag" in row["failure_reason"]
    assert _slot_mounts() == [] and list((tmp_path / "toolchains" / ".slots").iterdir()) == []
