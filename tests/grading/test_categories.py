"""Every failure-category pattern against a real error line, and the scan bound."""

from __future__ import annotations

import pytest

from reb_ray.grading.categories import SCAN_BYTES, classify_failure, owner_of

CASES = [
    ("ModuleNotFoundError: No module named 'yaml'", 1, "deps"),
    ("ImportError: cannot import name 'soft_unicode' from 'markupsafe'", 1, "deps"),
    ("ModuleNotFoundError: No module named 'mmcv._ext'", 1, "missing_compiled_ext"),
    ("ImportError: /venv/lib/python3.10/site-packages/flash_attn_2_cuda.so: undefined symbol: _ZN3c104cuda9SetDeviceEi", 1, "native_ext_abi"),
    ("RuntimeError: operator torchvision::nms does not exist", 1, "native_ext_abi"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB", 1, "oom"),
    ("Killed", 137, "oom"),
    ("OSError: [Errno 28] No space left on device", 1, "infra_disk_full"),
    ("RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error. It is possible that dataloader's workers are out of shared memory.", 1, "infra_shm"),
    ("RuntimeError: unable to write to file </torch_1234_567_8>: No space left on device (28)", 1, "infra_shm"),
    ("FileNotFoundError: [Errno 2] No such file or directory: 'checkpoints/depth_anything_v2_vits.pth'", 1, "assets"),
    ("huggingface_hub.errors.LocalEntryNotFoundError: Cannot find the requested files in the disk cache", 1, "assets"),
    ("python: can't open file '/work/repo/train.py': [Errno 2] No such file or directory", 2, "entrypoint_not_found"),
    ("sh: 1: torchrun: not found", 127, "entrypoint_not_found"),
    ("ValueError: shapes (3,4) and (5,6) not aligned", 1, "runtime"),
    # Seen in real sweeps (yomitoku, large_concept_model): pip installed the package, the OS lacks its library.
    ("ImportError: libxcb.so.1: cannot open shared object file: No such file or directory", 1, "system_deps"),
    ("OSError: fairseq2 requires libsndfile. Use your system package manager to install it (e.g. `apt install libsndfile1`).", 1, "system_deps"),
]


@pytest.mark.parametrize(("log", "exit_code", "category"), CASES)
def test_real_error_lines(log, exit_code, category):
    assert classify_failure(exit_code, False, "Traceback (most recent call last):\n  ...\n" + log + "\n") == category


def test_timeout_wins_over_any_log():
    assert classify_failure(124, True, "ModuleNotFoundError: No module named 'x'") == "timeout"


def test_only_the_tail_is_scanned():
    log = "ModuleNotFoundError: No module named 'early'\n" + "x" * (SCAN_BYTES + 10)
    assert classify_failure(1, False, log) == "runtime"


def test_owners():
    assert owner_of("infra_shm") == "infra" and owner_of("insufficient_hardware") == "hardware"
    assert owner_of("deps") == "agent" and owner_of(None) is None
