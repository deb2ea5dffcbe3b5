"""C4 end to end on CPU: real torch (CPU wheel) in a real Docker sandbox, 2 ranks over gloo.

No GPU is needed: `cpu_gloo=True` runs the ranks with CUDA_VISIBLE_DEVICES="" and
REB_RAY_C4_BACKEND=gloo, which the scripts below read. The torch venv is the probing tests'
image (tests/probing/conftest.py: `torch_image`, installed once per test process from the node's
wheel directories); the module's sandbox starts from it, network off.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time

import pytest

from reb_ray.grading.multi_gpu import grade_multi_gpu
from reb_ray.models.task import MultiGpuStageSpec
from reb_ray.probing.multi_gpu import (
    BACKEND_ENV,
    RUN_TAG_ENV,
    _reserve,
    choose_port,
    kill_run_leftovers,
    launch_command,
    run_multi_gpu,
)
from reb_ray.sandbox import SandboxConfig, open_sandbox
from tests.probing.conftest import TORCH_PY as VENV_PY

REPO = "/work/repo"
SHIM = "/opt/reb-ray-shim"
TIMINGS: dict[str, float] = {}

DDP_OK = """\
import os
import torch
import torch.distributed as dist

dist.init_process_group(os.environ.get("REB_RAY_C4_BACKEND", "nccl"))
rank, world = dist.get_rank(), dist.get_world_size()
assert world == 2, world
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
assert t.item() == 3.0, t.item()
print(f"rank={rank} master_port={os.environ['MASTER_PORT']} cuda_visible={os.environ['CUDA_VISIBLE_DEVICES']!r}", flush=True)
dist.barrier()
if rank == 0:
    print("world_size=2 ok", flush=True)
dist.destroy_process_group()
"""

# F10: rank 1 never joins (it says so before importing torch, so the stage's timeout need only
# cover torchrun's start); rank 0 waits in init_process_group far longer than the stage timeout.
DDP_HANG = """\
import datetime
import os
import time

if os.environ["RANK"] == "1":
    print("rank 1 never joins", flush=True)
    time.sleep(10**6)
import torch.distributed as dist

dist.init_process_group(os.environ.get("REB_RAY_C4_BACKEND", "nccl"), timeout=datetime.timedelta(hours=1))
print("unreachable", flush=True)
"""


def sh(sb, cmd: str, timeout: float = 300) -> str:
    res = sb.exec(["bash", "-c", cmd], timeout=timeout)
    assert res.ok, f"{cmd!r} -> {res.exit_code}: {res.output[-3000:]}"
    return res.output


def python_procs(sb) -> list[str]:
    """`pid cmdline` of every process in the sandbox whose program is python* (from /proc, not ps)."""
    out = sh(sb, "for d in /proc/[0-9]*; do c=$(tr '\\0' ' ' < $d/cmdline 2>/dev/null); "
                 "exe=${c%% *}; case \"${exe##*/}\" in python*) echo \"${d#/proc/} $c\";; esac; done; true")
    return [line for line in out.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def torch_sandbox(torch_image):
    """One sandbox (network off) from the image whose venv holds the CPU torch wheel."""
    config = SandboxConfig(image=torch_image, network="none", sweep_id="test", trial_id="c4-module")
    with open_sandbox("docker", config) as sb:
        sb.write_bytes(f"{REPO}/ddp_ok.py", DDP_OK.encode())
        sb.write_bytes(f"{REPO}/ddp_hang.py", DDP_HANG.encode())
        yield sb


# ------------------------------------------------------------------------ end to end (Docker)

@pytest.mark.docker
def test_two_rank_gloo_ddp_under_torchrun_succeeds_on_the_recorded_port(torch_sandbox):
    stage = MultiGpuStageSpec(command="python ddp_ok.py", timeout_s=180, launcher="torchrun", ranks=2,
                              success={"exit_code": 0, "log_pattern": "world_size=2 ok"})
    t = time.monotonic()
    raw = run_multi_gpu(torch_sandbox, stage, REPO, VENV_PY, SHIM, gpus=[], cpu_gloo=True)
    TIMINGS["gloo_2rank_s"] = time.monotonic() - t
    print(f"\n2-rank gloo run: {TIMINGS['gloo_2rank_s']:.1f} s")
    assert raw["exit_code"] == 0, raw["output"][-3000:]
    assert grade_multi_gpu(stage, raw) == {"status": "success", "failure_category": None, "reason": None}
    seen = re.findall(r"rank=(\d) master_port=(\d+) cuda_visible=''", raw["output"])
    assert sorted(rank for rank, _ in seen) == ["0", "1"], raw["output"][-3000:]
    assert {int(port) for _, port in seen} == {raw["port"]}
    assert raw["ports_tried"] == [raw["port"]]
    assert f"--master_port={raw['port']}" in raw["command"] and "--nproc_per_node=2" in raw["command"]
    assert raw["command"].endswith(" ddp_ok.py")  # the `python` word is stripped
    assert raw["backend"] == "gloo" and raw["cuda_visible_devices"] == ""
    assert raw["leftover_pids"] == [] and raw["leftovers_remaining"] == []
    assert python_procs(torch_sandbox) == []


@pytest.mark.docker
def test_f10_hung_rank_ends_at_the_timeout_with_no_rank_left(torch_sandbox):
    timeout_s = 12.0  # must really elapse: torchrun's start (an import of torch) and rank 1's line fit in it
    stage = MultiGpuStageSpec(command="python ddp_hang.py", timeout_s=timeout_s, launcher="torchrun", ranks=2)
    t = time.monotonic()
    raw = run_multi_gpu(torch_sandbox, stage, REPO, VENV_PY, SHIM, gpus=[], cpu_gloo=True)
    wall = time.monotonic() - t
    TIMINGS["timeout_to_return_s"] = wall - timeout_s
    print(f"\nF10: stage timeout {timeout_s:g} s, returned after {wall:.1f} s "
          f"({wall - timeout_s:.1f} s after the deadline; exec {raw['duration_s']:.1f} s)")
    assert "rank 1 never joins" in raw["output"]
    assert raw["timed_out"] is True
    assert timeout_s <= raw["duration_s"] <= timeout_s + 8
    assert wall <= timeout_s + 10
    graded = grade_multi_gpu(stage, raw)
    assert graded["status"] == "failure" and graded["failure_category"] == "timeout", graded
    assert raw["leftover_pids"] == [] and raw["leftovers_remaining"] == []  # exec's deadline got every rank
    assert python_procs(torch_sandbox) == []


@pytest.mark.docker
def test_fewer_gpus_than_ranks_runs_nothing(torch_sandbox):
    stage = MultiGpuStageSpec(command="touch /tmp/c4-ran && python ddp_ok.py", timeout_s=60, launcher="python", ranks=2)
    raw = run_multi_gpu(torch_sandbox, stage, REPO, VENV_PY, SHIM, gpus=["3"], cpu_gloo=False)
    assert raw["status_hint"] == "insufficient_hardware"
    assert raw["exit_code"] is None and raw["port"] is None and raw["command"] is None
    assert raw["gpus"] == ["3"] and raw["ranks"] == 2
    assert torch_sandbox.exec(["test", "-e", "/tmp/c4-ran"]).exit_code == 1
    graded = grade_multi_gpu(stage, raw)
    assert graded["status"] == "failure" and graded["failure_category"] == "insufficient_hardware"


@pytest.mark.docker
def test_leftover_sweep_kills_an_escaped_rank_by_tag_and_by_command_line(torch_sandbox):
    # Two detached processes that outlive their exec: one carries the run tag, one only
    # mentions the script in its command line (its environment was replaced with `env -i`).
    sh(torch_sandbox, f"{RUN_TAG_ENV}=abc setsid sleep 300 >/dev/null 2>&1 < /dev/null &")
    sh(torch_sandbox, "env -i setsid /bin/bash -c 'exec -a escaped_rank.py sleep 300' >/dev/null 2>&1 < /dev/null &")
    time.sleep(0.3)
    found, alive = kill_run_leftovers(torch_sandbox, "abc", ["escaped_rank.py"])
    assert len(found) == 2 and alive == []
    assert kill_run_leftovers(torch_sandbox, "abc", ["escaped_rank.py"]) == ([], [])


def test_local_leftover_sweep_kills_by_tag_only_never_by_command_line():
    # The local provider shares the host's processes: a process of another trial that runs the
    # same script must survive; only processes carrying this run's tag are killed.
    sandbox = open_sandbox("local", SandboxConfig(), trusted=True)
    other = subprocess.Popen(["bash", "-c", "exec -a other_trial_rank.py sleep 300"], start_new_session=True)
    try:
        sandbox.exec(f"{RUN_TAG_ENV}=tag123 setsid sleep 300 >/dev/null 2>&1 < /dev/null &", timeout=30)
        time.sleep(0.3)
        found, alive = kill_run_leftovers(sandbox, "tag123", ["other_trial_rank.py"])
        assert len(found) == 1 and alive == []
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()
        sandbox.close()


# ----------------------------------------------------------------- ports (local provider)

def test_concurrent_choose_port_calls_never_collide():
    sandbox = open_sandbox("local", SandboxConfig(), trusted=True)
    ports: list[int] = []
    lock = threading.Lock()

    def worker():
        for _ in range(4):
            port = choose_port(sandbox)
            with lock:
                ports.append(port)

    try:
        threads = [threading.Thread(target=worker) for _ in range(6)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(120)
    finally:
        sandbox.close()
    assert len(ports) == 24
    assert len(set(ports)) == 24
    assert all(1024 <= p <= 65535 for p in ports)


def test_a_port_handed_out_is_refused_to_another_process_on_the_node():
    sandbox = open_sandbox("local", SandboxConfig(), trusted=True)
    try:
        port = choose_port(sandbox)
    finally:
        sandbox.close()
    assert _reserve(port) is False  # nor again to this process
    code = f"from reb_ray.probing.multi_gpu import _reserve; print(_reserve({port}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


# ------------------------------------------------------------------ launch_command (pure)

PY = "/opt/envs/my env/bin/python"
QPY = "'/opt/envs/my env/bin/python'"


def stage(command, launcher="torchrun", ranks=2):
    return MultiGpuStageSpec(command=command, launcher=launcher, ranks=ranks)


def test_torchrun_strips_the_python_word_and_sets_ranks_and_port():
    assert launch_command(stage("python train.py --steps 1"), PY, 29555, 2) == (
        f"{QPY} -m torch.distributed.run --nproc_per_node=2 --master_addr=127.0.0.1 --master_port=29555 "
        "train.py --steps 1")
    assert launch_command(stage("python3 -m pkg.train --x"), PY, 1234, 4).endswith(
        "--nproc_per_node=4 --master_addr=127.0.0.1 --master_port=1234 -m pkg.train --x")
    assert launch_command(stage("train.py"), PY, 1, 2).endswith("--master_port=1 train.py")
    assert launch_command(stage("python_tools/run.py"), PY, 1, 2).endswith(" python_tools/run.py")


def test_torchrun_keeps_leading_assignments_in_front_and_quotes_argv_lists():
    line = launch_command(stage("FOO=1 BAR=x python train.py"), PY, 7, 2)
    assert line == f"FOO=1 BAR=x {QPY} -m torch.distributed.run --nproc_per_node=2 --master_addr=127.0.0.1 --master_port=7 train.py"
    line = launch_command(stage(["python3", "train.py", "--name", "a b"]), PY, 7, 2)
    assert line.endswith("--master_port=7 train.py --name 'a b'")


def test_accelerate_and_deepspeed_rules():
    assert launch_command(stage("python train.py --cfg c.yaml", "accelerate"), PY, 29600, 2) == (
        f"{QPY} -m accelerate.commands.launch --num_processes 2 --main_process_port 29600 train.py --cfg c.yaml")
    assert launch_command(stage("python train.py", "deepspeed"), PY, 29601, 2) == (
        f"{QPY} -m deepspeed.launcher.runner --num_gpus 2 --master_addr 127.0.0.1 --master_port 29601 train.py")
    assert launch_command(stage("python -m pkg.train", "deepspeed"), PY, 5, 2).endswith("--master_port 5 --module pkg.train")


def test_python_launcher_runs_the_command_as_is():
    assert launch_command(stage("python main.py --devices 0,1", "python"), PY, 5, 2) == "python main.py --devices 0,1"
    assert launch_command(stage(["python", "main.py", "a b"], "python"), PY, 5, 2) == "python main.py 'a b'"


def test_a_command_with_nothing_to_launch_is_an_error():
    with pytest.raises(ValueError, match="names no script"):
        launch_command(stage("python"), PY, 5, 2)


def test_backend_switch_name_is_stable():
    assert BACKEND_ENV == "REB_RAY_C4_BACKEND"
