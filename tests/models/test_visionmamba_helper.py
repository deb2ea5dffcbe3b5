"""The VisionMamba stages run example.py through helpers/run_example.py, which drops the `heads`
keyword that Vim forwards to VisionEncoderMambaBlock (whose __init__ rejects it at the pinned
commit) and discards the block's tensor dumps. Shown on CPU with a stand-in repository written here
that has the same call shape (and a stand-in `torch` that records the default device), so no
torch install is needed: unpatched, example.py stops with the TypeError; through the helper it
gets past it and prints its result."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from reb_ray.suite.load import load_suite

TASK = Path(__file__).resolve().parents[2] / "tasks" / "researchenvbench" / "kyegomez--visionmamba"
HELPER = TASK / "helpers" / "run_example.py"

MODEL = '''
class VisionEncoderMambaBlock:
    def __init__(self, dim, dt_rank, dim_inner, d_state):
        self.dim = dim

    def process_direction(self, x):
        print("Conv1d: " + "0.1234 " * 2000)  # the repository dumps whole tensors here
        return x + 1


class Vim:
    def __init__(self, dim, dt_rank=32, dim_inner=None, d_state=None, depth=12, *args, **kwargs):
        self.layers = [VisionEncoderMambaBlock(dim=dim, dt_rank=dt_rank, dim_inner=dim_inner,
                                               d_state=d_state, *args, **kwargs) for _ in range(depth)]

    def __call__(self, x):
        for layer in self.layers:
            x = layer.process_direction(x)
        return x
'''
EXAMPLE = '''
from vision_mamba.model import Vim

model = Vim(dim=256, heads=8, dt_rank=32, dim_inner=256, d_state=256, depth=12)
print("out", model(0))
'''
TORCH = '''
import os, sys
class cuda:
    @staticmethod
    def is_available():
        return False
    @staticmethod
    def set_device(i):
        raise AssertionError("no CUDA here")
def set_default_device(device):
    print("default device", device, file=sys.stderr)
'''


@pytest.fixture()
def repo(tmp_path):
    (tmp_path / "vision_mamba").mkdir()
    (tmp_path / "vision_mamba" / "__init__.py").write_text("from vision_mamba.model import Vim\n")
    (tmp_path / "vision_mamba" / "model.py").write_text(textwrap.dedent(MODEL))
    (tmp_path / "example.py").write_text(textwrap.dedent(EXAMPLE))
    (tmp_path / "torch.py").write_text(textwrap.dedent(TORCH))
    return tmp_path


def run(repo: Path, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *argv], cwd=repo, capture_output=True, text=True, timeout=60)


def test_the_unpatched_example_stops_with_the_type_error(repo):
    res = run(repo, "example.py")
    assert res.returncode == 1
    assert "TypeError" in res.stderr and "heads" in res.stderr


def test_the_helper_gets_past_the_type_error_and_silences_the_dumps(repo):
    res = run(repo, str(HELPER), "--device", "cpu")
    assert res.returncode == 0, res.stderr
    assert res.stdout == "out 12\n"  # twelve blocks ran; none of their dumps reached the output
    assert "default device cpu" in res.stderr
    assert "VisionEncoderMambaBlock.__init__ does not take heads: dropped" in res.stderr


def test_cuda_without_a_device_fails_at_once(repo):
    res = run(repo, str(HELPER), "--device", "cuda")
    assert res.returncode == 1 and "torch sees no CUDA device" in res.stderr


def test_a_missing_dependency_is_left_to_fail_as_itself(repo):
    (repo / "vision_mamba" / "model.py").write_text("import zeta_missing_dependency\n" + textwrap.dedent(MODEL))
    res = run(repo, str(HELPER), "--device", "cpu")
    assert res.returncode == 1
    assert "ModuleNotFoundError: No module named 'zeta_missing_dependency'" in res.stderr


def test_every_visionmamba_stage_runs_example_py_through_the_helper():
    task = {t.id: t for t in load_suite("researchenvbench")}["kyegomez--visionmamba"]
    for name, device in (("cpu", "cpu"), ("single_gpu", "cuda"), ("multi_gpu", "cuda")):
        stage = getattr(task.stages, name)
        assert stage.command == f"python $REB_RAY_HELPERS/run_example.py --device {device}", name
