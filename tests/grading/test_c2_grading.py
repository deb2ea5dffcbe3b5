"""C2 grading: raw records shaped exactly as probes/c2_probe.py writes them -> status and category.

REAL_CPU_TORCH and REAL_NO_FRAMEWORK are verbatim records of real probe runs (the CPU torch
2.13.0 wheel in a Docker sandbox, and the host's torch-less python). The GPU-shaped records are
derived from them with the texts PyTorch really prints (c10/cuda/CUDAFunctions.cpp,
torch/cuda/__init__.py), as seen in user reports; no GPU exists on the machine these tests run on.
"""

from __future__ import annotations

import copy

import pytest

from reb_ray.grading.c2 import C2_CATEGORIES, C2_KEYS, WARNING_TEXT_BYTES, arch_supports, grade_c2

NUMPY_WARNING = ("UserWarning: Failed to initialize NumPy: No module named 'numpy' (Triggered internally at "
                 "/__w/pytorch/pytorch/torch/csrc/utils/tensor_numpy.cpp:84.)")

# probes/c2_probe.py with /opt/envs/torch/bin/python (torch 2.13.0+cpu from /opt/wheels) in a Docker
# sandbox, run_c2(..., visible_gpus="0"): the whole record, stdout_tail included.
REAL_CPU_TORCH = {
    "probe_version": 1, "framework": "torch", "torch_present": True,
    "torch_file": "/opt/envs/torch/lib/python3.11/site-packages/torch/__init__.py",
    "torch_version": "2.13.0+cpu", "cuda_build": None, "hip_build": None, "cuda_available": False,
    "device_count": 0, "device_names": [], "capabilities": [], "arch_list": [], "arch_list_source": "get_arch_list",
    "device_errors": [], "kernel_attempted": False, "kernel_ok": False, "kernel_error": None,
    "kernel_max_abs_err": None, "kernel_device": None, "kernel_s": None, "import_error": None,
    "warnings": [NUMPY_WARNING], "tf": None, "jax": None, "cuda_visible_devices": "0", "stage": "done",
    "python": "/opt/envs/torch/bin/python", "python_version": "3.11.2", "nvidia_driver": None,
    "libcuda_driver_cuda": None,
    "libcuda_error": "OSError: libcuda.so.1: cannot open shared object file: No such file or directory",
    "worker_exit_code": 0, "worker_timed_out": False, "stderr_tail": "", "worker_stdout_tail": "",
    "worker_error": None, "duration_s": 1.338,
    "stdout_tail": "c2 probe: framework torch, torch 2.13.0+cpu, cuda build None, devices 0, kernel ok False, 1.3s\n",
}

# probes/c2_probe.py run by a python with no framework (the host's).
REAL_NO_FRAMEWORK = {
    "probe_version": 1, "framework": None, "torch_present": False, "torch_file": None, "torch_version": None,
    "cuda_build": None, "hip_build": None, "cuda_available": None, "device_count": None, "device_names": [],
    "capabilities": [], "arch_list": [], "arch_list_source": None, "device_errors": [], "kernel_attempted": False,
    "kernel_ok": False, "kernel_error": None, "kernel_max_abs_err": None, "kernel_device": None, "kernel_s": None,
    "import_error": None, "warnings": [], "tf": None, "jax": None, "cuda_visible_devices": None, "stage": "done",
    "python": "/root/.pyenv/versions/3.11.7/bin/python", "python_version": "3.11.7", "nvidia_driver": None,
    "libcuda_driver_cuda": None,
    "libcuda_error": "OSError: libcuda.so.1: cannot open shared object file: No such file or directory",
    "worker_exit_code": 0, "worker_timed_out": False, "stderr_tail": "", "worker_stdout_tail": "",
    "worker_error": None, "duration_s": 0.194,
}

H200 = "NVIDIA H200"
CU128_ARCH = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]
DRIVER_570 = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.133.20  Fri Feb 28 21:09:48 UTC 2025"

# PyTorch's TORCH_WARN in c10::cuda::device_count(), as users see it (driver 570 = CUDA 12.8, torch cu130).
DRIVER_TOO_OLD_WARNING = (
    "UserWarning: CUDA initialization: The NVIDIA driver on your system is too old (found version 12080). "
    "Please update your GPU driver by downloading and installing a new version from the URL: "
    "http://www.nvidia.com/Download/index.aspx Alternatively, go to: https://pytorch.org to install a PyTorch "
    "version that has been compiled with your version of the CUDA driver. (Triggered internally at "
    "/pytorch/c10/cuda/CUDAFunctions.cpp:119.)")
DRIVER_TOO_OLD_ERROR = (
    'Traceback (most recent call last):\n  File "/opt/reb-ray-toolbox/probes/c2_probe.py", line 105, in capturing\n'
    "    return fn(), None\n  File \"/opt/envs/research/lib/python3.12/site-packages/torch/cuda/__init__.py\", "
    "line 372, in _lazy_init\n    torch._C._cuda_init()\n"
    "RuntimeError: The NVIDIA driver on your system is too old (found version 12080). Please update your GPU "
    "driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx "
    "Alternatively, go to: https://pytorch.org to install a PyTorch version that has been compiled with your "
    "version of the CUDA driver.\n")
NO_DRIVER_ERROR = (
    "Traceback (most recent call last):\n    torch._C._cuda_init()\nRuntimeError: Found no NVIDIA driver on your "
    "system. Please check that you have an NVIDIA GPU and installed a driver from "
    "http://www.nvidia.com/Download/index.aspx\n")
NO_GPUS_ERROR = "Traceback (most recent call last):\n    torch._C._cuda_init()\nRuntimeError: No CUDA GPUs are available\n"
# torch/cuda/__init__.py _check_cubins() and the launch error, torch 2.6.0+cu124 on a Blackwell card.
BLACKWELL = "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
ARCH_WARNING = (
    f"UserWarning: \n{BLACKWELL} with CUDA capability sm_120 is not compatible with the current PyTorch installation.\n"
    "The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90.\n"
    f"If you want to use the {BLACKWELL} GPU with PyTorch, please check the instructions at "
    "https://pytorch.org/get-started/locally/\n")
NO_KERNEL_IMAGE = (
    "Traceback (most recent call last):\n    out = (da @ db) * 2.0 + 1.0\ntorch.AcceleratorError: CUDA error: no kernel "
    "image is available for execution on the device\nCUDA kernel errors might be asynchronously reported at some "
    "other API call, so the stacktrace below might be incorrect.\n")
ILLEGAL_ACCESS = ("Traceback (most recent call last):\n    torch.cuda.synchronize(0)\ntorch.AcceleratorError: CUDA error: "
                  "an illegal memory access was encountered\n")


def gpu(**changes) -> dict:
    """A GPU-node record: the real CPU record's shape with a CUDA build's fields filled in."""
    raw = copy.deepcopy(REAL_CPU_TORCH)
    del raw["stdout_tail"]
    raw.update(
        torch_file="/opt/envs/research/lib/python3.12/site-packages/torch/__init__.py", torch_version="2.8.0+cu128",
        cuda_build="12.8", cuda_available=True, device_count=1, device_names=[H200], capabilities=["9.0"],
        arch_list=list(CU128_ARCH), kernel_attempted=True, kernel_ok=True, kernel_max_abs_err=0.0,
        kernel_device="cuda:0", kernel_s=0.412, warnings=[], python="/opt/envs/research/bin/python",
        python_version="3.12.3", nvidia_driver=DRIVER_570, libcuda_driver_cuda=12080, libcuda_error=None,
        duration_s=4.81,
    )
    raw.update(changes)
    return raw


def no_gpu_seen(**changes) -> dict:
    return gpu(cuda_available=False, device_count=0, device_names=[], capabilities=[], kernel_ok=False,
               kernel_max_abs_err=None, kernel_s=None, **changes)


def tf(**changes) -> dict:
    sub = {"present": True, "version": "2.17.0", "built_with_cuda": True,
           "build_info": {"cuda_version": "12.3", "cudnn_version": "8", "is_cuda_build": "True"},
           "gpus": ["/physical_device:GPU:0"], "import_error": None, "error": None, "op_ok": True, "op_error": None,
           "op_device": "/job:localhost/replica:0/task:0/device:GPU:0"}
    sub.update(changes)
    return dict(copy.deepcopy(REAL_NO_FRAMEWORK), framework="tensorflow", tf=sub)


def jax(**changes) -> dict:
    sub = {"present": True, "version": "0.4.35", "jaxlib_version": "0.4.35", "cuda_plugins": ["jax_cuda12_plugin"],
           "backend": "gpu", "devices": ["gpu:0:NVIDIA H200"], "gpu_devices": ["gpu:0:NVIDIA H200"], "gpu_error": None,
           "import_error": None, "error": None, "op_ok": True, "op_error": None, "op_device": "cuda:0"}
    sub.update(changes)
    return dict(copy.deepcopy(REAL_NO_FRAMEWORK), framework="jax", jax=sub)


CASES = {
    # -- F07: a CPU-only torch is cpu_only_build, also on a GPU node whose driver warns
    "real_cpu_torch": (REAL_CPU_TORCH, "failure", "cpu_only_build"),
    "cpu_torch_on_gpu_node": (dict(REAL_CPU_TORCH, nvidia_driver=DRIVER_570, libcuda_driver_cuda=12080, libcuda_error=None),
                              "failure", "cpu_only_build"),
    "cpu_torch_beats_driver_text": (dict(REAL_CPU_TORCH, warnings=[DRIVER_TOO_OLD_WARNING]), "failure", "cpu_only_build"),
    "rocm_torch": (dict(REAL_CPU_TORCH, torch_version="2.5.1+rocm6.2", hip_build="6.2.41133"), "failure", "cpu_only_build"),
    # -- no framework
    "real_no_framework": (REAL_NO_FRAMEWORK, "failure", "no_framework"),
    "torch_import_broken": (dict(REAL_CPU_TORCH, torch_version=None, warnings=[], stage="done", import_error=(
        "Traceback (most recent call last):\n  File \"<frozen importlib._bootstrap>\", line 1, in <module>\n"
        "ImportError: libcudnn.so.9: cannot open shared object file: No such file or directory\n")),
        "failure", "no_framework"),
    "torch_import_segfault": (dict(REAL_CPU_TORCH, torch_version=None, warnings=[], stage="import",
                                   worker_exit_code=-11, import_error="the probe worker died of SIGSEGV in stage 'import'",
                                   worker_error="the probe worker died of SIGSEGV in stage 'import'"),
                              "failure", "no_framework"),
    # -- success
    "h200_success": (gpu(), "success", None),
    "ptx_jit_success": (gpu(arch_list=["sm_80", "compute_80"], capabilities=["9.0"]), "success", None),
    # -- driver too old: the warning at CUDA init, or only the error of the kernel's lazy init
    "driver_too_old_warning": (no_gpu_seen(torch_version="2.11.0+cu130", cuda_build="13.0", warnings=[
        "UserWarning: Failed to initialize NumPy: No module named 'numpy' (Triggered internally at "
        "/pytorch/torch/csrc/utils/tensor_numpy.cpp:84.)", DRIVER_TOO_OLD_WARNING],
        arch_list=["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"], arch_list_source="_cuda_getArchFlags",
        kernel_error=DRIVER_TOO_OLD_ERROR), "failure", "driver_too_old"),
    "driver_too_old_kernel_only": (no_gpu_seen(torch_version="2.11.0+cu130", cuda_build="13.0",
                                               kernel_error=DRIVER_TOO_OLD_ERROR), "failure", "driver_too_old"),
    "cudart_insufficient_driver": (gpu(kernel_ok=False, kernel_error=(
        "RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version\n")),
        "failure", "driver_too_old"),
    # -- no device: GPUs hidden, or no driver at all in the sandbox
    "cuda_build_gpus_hidden": (no_gpu_seen(cuda_visible_devices="", kernel_error=NO_GPUS_ERROR), "failure", "no_device"),
    "no_nvidia_driver": (no_gpu_seen(nvidia_driver=None, libcuda_driver_cuda=None, kernel_error=NO_DRIVER_ERROR,
                                     libcuda_error="OSError: libcuda.so.1: cannot open shared object file"),
                         "failure", "no_device"),
    # -- arch not supported: a cu124 build (sm_50..sm_90) on Blackwell (12.0) and on B200 (10.0)
    "blackwell_cu124": (gpu(torch_version="2.6.0+cu124", cuda_build="12.4", device_names=[BLACKWELL],
                            capabilities=["12.0"], arch_list=["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"],
                            warnings=[ARCH_WARNING], kernel_ok=False, kernel_max_abs_err=None,
                            kernel_error=NO_KERNEL_IMAGE), "failure", "arch_not_supported"),
    "b200_rule_only": (gpu(torch_version="2.6.0+cu124", cuda_build="12.4", device_names=["NVIDIA B200"],
                           capabilities=["10.0"], arch_list=["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"],
                           kernel_ok=False, kernel_error=ILLEGAL_ACCESS), "failure", "arch_not_supported"),
    "no_kernel_image_text_only": (gpu(arch_list=[], kernel_ok=False, kernel_error=NO_KERNEL_IMAGE),
                                  "failure", "arch_not_supported"),
    "second_device_unsupported": (gpu(device_count=2, device_names=[H200, "Tesla K80"], capabilities=["9.0", "3.7"]),
                                  "failure", "arch_not_supported"),
    # -- kernel failed: the arch is covered (sm_90, or compute_90 PTX for 10.0) but the kernel broke
    "illegal_memory_access": (gpu(kernel_ok=False, kernel_error=ILLEGAL_ACCESS), "failure", "kernel_failed"),
    "b200_with_ptx_kernel_broke": (gpu(device_names=["NVIDIA B200"], capabilities=["10.0"], arch_list=["sm_80", "sm_90", "compute_90"],
                                       kernel_ok=False, kernel_error=ILLEGAL_ACCESS), "failure", "kernel_failed"),
    "result_mismatch": (gpu(kernel_ok=False, kernel_max_abs_err=3.0, kernel_error=(
        "Traceback (most recent call last):\nAssertionError: kernel result differs from the CPU: max abs error 3\n")),
        "failure", "kernel_failed"),
    "worker_timed_out_in_kernel": (gpu(kernel_ok=False, stage="kernel", worker_timed_out=True, worker_exit_code=-9,
                                       kernel_error="the probe worker timed out after 280s in stage 'kernel'",
                                       worker_error="the probe worker timed out after 280s in stage 'kernel'"),
                                   "failure", "kernel_failed"),
    # -- TensorFlow / JAX only
    "tf_success": (tf(), "success", None),
    "tf_cpu_build": (tf(built_with_cuda=False, gpus=[], op_ok=False, op_device=None), "failure", "cpu_only_build"),
    "tf_no_gpu": (tf(gpus=[], op_ok=False, op_device=None), "failure", "no_device"),
    "tf_op_failed": (tf(op_ok=False, op_device=None, op_error="InternalError: cuBLAS call failed"), "failure", "kernel_failed"),
    "tf_import_broken": (tf(version=None, gpus=[], op_ok=False, import_error="ImportError: libcudart.so.12: cannot open"),
                         "failure", "no_framework"),
    "jax_success": (jax(), "success", None),
    "jax_cpu_only": (jax(cuda_plugins=[], backend="cpu", devices=["cpu:0:cpu"], gpu_devices=[], op_ok=False,
                         gpu_error="RuntimeError: Unknown backend: 'gpu' requested, but no platforms that are instances "
                                   "of gpu are present. Platforms present are: cpu"), "failure", "cpu_only_build"),
    "jax_plugin_no_gpu": (jax(backend="cpu", devices=["cpu:0:cpu"], gpu_devices=[], op_ok=False,
                              gpu_error="RuntimeError: Unable to initialize backend 'cuda': no supported devices found"),
                          "failure", "no_device"),
    "jax_driver_too_old": (jax(backend="cpu", devices=["cpu:0:cpu"], gpu_devices=[], op_ok=False, gpu_error=(
        "RuntimeError: Unable to initialize backend 'cuda': INTERNAL: ... The NVIDIA driver's CUDA version is 12.2 "
        "which is older than the PTX compiler version (12.6.77)")), "failure", "driver_too_old"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_category_table(name):
    raw, status, category = CASES[name]
    before = copy.deepcopy(raw)
    g = grade_c2(raw)
    assert set(g) == set(C2_KEYS)
    assert (g["c2_status"], g["failure_category"]) == (status, category), g
    assert category is None or category in C2_CATEGORIES
    assert g["reason"] and "\n" not in g["reason"] and len(g["reason"]) <= 300
    assert raw == before, "grading must not modify the raw record"


def test_real_cpu_torch_facts():
    g = grade_c2(REAL_CPU_TORCH)
    assert g == {
        "c2_status": "failure", "failure_category": "cpu_only_build",
        "reason": "torch 2.13.0+cpu is a CPU-only build: torch.version.cuda is None",
        "c2_warning_text": NUMPY_WARNING, "c2_torch_version": "2.13.0+cpu", "c2_cuda_build": None,
        "c2_device_count": 0, "c2_device_names": [], "c2_capability": None, "c2_arch_list": [],
    }


def test_success_facts_and_reason():
    g = grade_c2(gpu())
    assert g["c2_device_count"] == 1 and g["c2_device_names"] == [H200] and g["c2_capability"] == "9.0"
    assert g["c2_arch_list"] == CU128_ARCH and g["c2_cuda_build"] == "12.8" and g["c2_warning_text"] is None
    assert H200 in g["reason"] and "2.8.0+cu128" in g["reason"]


def test_driver_too_old_reason_quotes_the_warning():
    raw, _, _ = CASES["driver_too_old_warning"]
    g = grade_c2(raw)
    assert "found version 12080" in g["reason"]
    assert "The NVIDIA driver on your system is too old" in g["c2_warning_text"]
    assert g["c2_arch_list"] == ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]
    assert g["c2_device_count"] == 0


def test_not_run_and_malformed():
    for raw in (None, ["not", "a", "dict"]):
        g = grade_c2(raw)
        assert g["c2_status"] == "not_run" and g["failure_category"] is None and g["c2_device_count"] is None
        assert set(g) == set(C2_KEYS) and g["c2_device_names"] == [] and g["c2_arch_list"] == []
    g = grade_c2({"probe_error": "OSError: [Errno 28] No space left on device", "framework": None})
    assert g["c2_status"] == "not_run" and "No space left" in g["reason"]


def test_warning_text_is_bounded_to_4_kb():
    many = [f"UserWarning: {i} " + "\u00e9" * 1999 for i in range(50)]
    g = grade_c2(gpu(warnings=many))
    assert len(g["c2_warning_text"].encode("utf-8")) <= WARNING_TEXT_BYTES
    assert g["c2_warning_text"].startswith("UserWarning: 0 ")


@pytest.mark.parametrize("arch, capability, expected", [
    (["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"], "10.0", False),  # the brief's example
    (["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "compute_90"], "10.0", True),  # PTX JIT
    (["sm_80", "compute_100"], "9.0", False),  # PTX only runs on devices at or above its own level
    (["sm_80"], "8.6", True),  # same major, higher minor: cubin compatible
    (["sm_86"], "8.0", False),  # ... but not downwards
    (["sm_90a"], "9.0", True),
    (["sm_90a", "compute_90a"], "10.0", False),  # arch-specific targets run only on exactly 9.0
    (["sm_100f"], "10.3", True),  # family target
    (["sm_80"], "8.7", False),  # Jetson Orin runs only code built for 8.7
    (["sm_87"], "8.7", True),
    (["sm_120"], "12.0", True),
    (CU128_ARCH, "9.0", True),
    ([], "9.0", None),
    (["sm_90"], None, None),
    (["sm_90"], "garbage", None),
])
def test_arch_supports(arch, capability, expected):
    assert arch_supports(arch, capability) is expected
