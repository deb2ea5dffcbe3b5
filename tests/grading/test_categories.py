"""Failure categories: real error lines, and real logs whose final error follows a misleading
warning of another category (the error that ended the run decides, not the first pattern)."""

from __future__ import annotations

import pytest

from reb_ray.grading.categories import ASSET_CACHE, SCAN_BYTES, classify_failure, owner_of

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
    ("huggingface_hub.errors.LocalEntryNotFoundError: Cannot find the requested files in the disk cache", 1, "infra_assets"),
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


# ---------------------------------------------------------------- misleading warnings (real text)

#: bitsandbytes 0.41 on a machine without its CUDA library: prints this and carries on.
BNB_UNDEFINED_SYMBOL = """\
/venv/lib/python3.10/site-packages/bitsandbytes/cextension.py:34: UserWarning: The installed version of bitsandbytes was compiled without GPU support. 8-bit optimizers, 8-bit multiplication, and GPU quantization are unavailable.
  warn("The installed version of bitsandbytes was compiled without GPU support. "
/venv/lib/python3.10/site-packages/bitsandbytes/libbitsandbytes_cpu.so: undefined symbol: cadam32bit_grad_fp32
"""
#: torchvision built against another torch: only torchvision.io is lost.
TORCHVISION_IMAGE_SO = """\
/venv/lib/python3.10/site-packages/torchvision/io/image.py:13: UserWarning: Failed to load image Python extension: '/venv/lib/python3.10/site-packages/torchvision/image.so: undefined symbol: _ZN3c1017RegisterOperatorsD1Ev'If you don't plan on using image functionality from `torchvision.io`, you can ignore this warning. Otherwise, there might be something wrong with your environment. Did you have `libjpeg` or `libpng` installed before building `torchvision` from source?
  warn(
"""
#: xformers logs a caught ImportError with its traceback when triton is absent, then works.
XFORMERS_NO_TRITON = """\
A matching Triton is not available, some optimizations will not be enabled
Traceback (most recent call last):
  File "/venv/lib/python3.10/site-packages/xformers/__init__.py", line 55, in _is_triton_available
    from xformers.triton.softmax import softmax as triton_softmax  # noqa
  File "/venv/lib/python3.10/site-packages/xformers/triton/softmax.py", line 11, in <module>
    import triton
ModuleNotFoundError: No module named 'triton'
"""
#: NCCL falls back when it cannot size its /dev/shm segment for one transport.
NCCL_SHM_WARN = """\
node1:2211:2290 [1] misc/shmutils.cc:72 NCCL WARN Error: failed to extend /dev/shm/nccl-Kq8x2b to 9637892 bytes
node1:2211:2290 [1] misc/shmutils.cc:112 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-Kq8x2b (size 9637888)
"""
#: matplotlib cannot create its config dir (a full home volume) and uses a temporary one.
MATPLOTLIB_ENOSPC = """\
mkdir -p failed for path /root/.config/matplotlib: [Errno 28] No space left on device
Matplotlib created a temporary cache directory at /tmp/matplotlib-3v2x9q1k because the default path (/root/.config/matplotlib) is not a writable directory; it is highly recommended to set the MPLCONFIGDIR environment variable to a writable directory, in particular to speed up the import of Matplotlib and to better support multiprocessing.
"""
#: OpenBLAS starts fewer threads when the container limits them.
OPENBLAS_THREADS = """\
OpenBLAS blas_thread_init: pthread_create failed for thread 7 of 16: Cannot allocate memory
OpenBLAS blas_thread_init: RLIMIT_NPROC 4096 current, 4096 max
"""


def tb(*frames_and_exception: str) -> str:
    """A Python traceback: frame lines (indented as Python prints them), then the exception."""
    *frames, exception = frames_and_exception
    return "Traceback (most recent call last):\n" + "".join(f"  {f}\n" for f in frames) + exception + "\n"


TRAIN = 'File "/work/repo/train.py", line 7, in <module>'

# (category, exit code, log): every log carries a warning of ANOTHER category before its final error.
MISLEADING = {
    "deps": (1, BNB_UNDEFINED_SYMBOL + tb(TRAIN, "  from einops import rearrange",
                                          "ModuleNotFoundError: No module named 'einops'")),
    "system_deps": (1, TORCHVISION_IMAGE_SO + tb(
        'File "/work/repo/demo.py", line 3, in <module>', "  import cv2",
        'File "/venv/lib/python3.10/site-packages/cv2/__init__.py", line 181, in <module>', "  bootstrap()",
        'File "/venv/lib/python3.10/site-packages/cv2/__init__.py", line 153, in bootstrap',
        '  native_module = importlib.import_module("cv2")',
        "ImportError: libGL.so.1: cannot open shared object file: No such file or directory")),
    "native_ext_abi": (1, OPENBLAS_THREADS + tb(
        TRAIN, "  from flash_attn import flash_attn_func",
        'File "/venv/lib/python3.10/site-packages/flash_attn/flash_attn_interface.py", line 10, in <module>',
        "  import flash_attn_2_cuda as flash_attn_cuda",
        "ImportError: /venv/lib/python3.10/site-packages/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so: "
        "undefined symbol: _ZN3c104cuda9SetDeviceEi")),
    "missing_compiled_ext": (1, TORCHVISION_IMAGE_SO + tb(
        'File "/work/repo/tools/train.py", line 10, in <module>', "  from mmdet.apis import train_detector",
        'File "/venv/lib/python3.10/site-packages/mmcv/utils/ext_loader.py", line 13, in load_ext',
        "  ext = importlib.import_module('mmcv.' + name)",
        "ModuleNotFoundError: No module named 'mmcv._ext'")),
    # The issue's case: bitsandbytes' warning, then a dataset the agent was to provide.
    "assets": (1, BNB_UNDEFINED_SYMBOL + "Loading dataset...\n" + tb(
        'File "/work/repo/finetune.py", line 41, in main', "  with open(args.data_path) as f:",
        "FileNotFoundError: [Errno 2] No such file or directory: 'data/alpaca_data_cleaned.json'")),
    "oom": (1, MATPLOTLIB_ENOSPC + "epoch 0 step 10 loss 2.31\n" + tb(
        'File "/work/repo/train.py", line 140, in <module>', "  loss.backward()",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "79.10 GiB of which 1.06 GiB is free. Including non-PyTorch memory, this process has 78.03 GiB memory in use.")),
    # F10: one rank never joins the all_reduce; NCCL's watchdog takes the process down.
    "timeout": (134, XFORMERS_NO_TRITON + """\
[rank1]:[E ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600054 milliseconds before timing out.
[rank1]:[E ProcessGroupNCCL.cpp:627] [Rank 1] To avoid data inconsistency, we are taking the entire process down.
terminate called after throwing an instance of 'c10::DistBackendError'
  what():  [PG 0 Rank 1] Process group watchdog thread terminated with exception: [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600054 milliseconds before timing out.
"""),
    "entrypoint_not_found": (127, XFORMERS_NO_TRITON + "prepared 2 samples\nsh: 1: torchrun: not found\n"),
    "runtime": (1, BNB_UNDEFINED_SYMBOL + tb(
        'File "/work/repo/model.py", line 88, in forward', "  return self.head(x)",
        "RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x512 and 256x10)")),
    # torch raises "exited unexpectedly" from the worker's bus error: the chain's cause decides.
    "infra_shm": (1, XFORMERS_NO_TRITON
                  + "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).\n"
                  + tb('File "/venv/lib/python3.10/site-packages/torch/utils/data/_utils/signal_handling.py", line 66, in handler',
                       "  _error_if_any_worker_fails()",
                       "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error. It is possible that "
                       "dataloader's workers are out of shared memory. Please try to raise your shared memory limit.")
                  + "\nThe above exception was the direct cause of the following exception:\n\n"
                  + tb(TRAIN, "  for batch in loader:", "RuntimeError: DataLoader worker (pid(s) 4242) exited unexpectedly")),
    "infra_disk_full": (1, NCCL_SHM_WARN + tb(
        'File "/work/repo/train.py", line 201, in <module>', "  json.dump(metrics, f)",
        "OSError: [Errno 28] No space left on device")),
    # The cache is the harness's: a Hub file offline mode cannot find is never the agent's.
    "infra_assets": (1, XFORMERS_NO_TRITON + tb(
        'File "/venv/lib/python3.10/site-packages/transformers/utils/hub.py", line 402, in cached_file',
        "  resolved_file = hf_hub_download(",
        "huggingface_hub.errors.LocalEntryNotFoundError: Cannot find the requested files in the disk cache and outgoing "
        "traffic has been disabled. To enable hf.co look-ups and downloads online, set 'local_files_only' to False.")
        + "\nThe above exception was the direct cause of the following exception:\n\n" + tb(
        'File "/work/repo/infer.py", line 20, in <module>',
        '  model = AutoModel.from_pretrained("KRLabsOrg/lettucedect-base-modernbert-en-v1")',
        "OSError: We couldn't connect to 'https://huggingface.co' to load this file, couldn't find it in the cached files "
        "and it looks like KRLabsOrg/lettucedect-base-modernbert-en-v1 is not the path to a directory containing a file "
        "named config.json.\nCheckout your internet connection or see how to run the library in offline mode at "
        "'https://huggingface.co/docs/transformers/installation#offline-mode'.")),
}


@pytest.mark.parametrize("category", sorted(MISLEADING))
def test_final_error_wins_over_a_misleading_warning(category):
    exit_code, log = MISLEADING[category]
    assert classify_failure(exit_code, False, log) == category


def test_every_agent_and_log_category_has_a_misleading_case():
    assert set(MISLEADING) == {"deps", "system_deps", "native_ext_abi", "missing_compiled_ext", "assets", "oom",
                               "timeout", "entrypoint_not_found", "runtime", "infra_shm", "infra_disk_full",
                               "infra_assets"}


def test_timeout_wins_over_any_log():
    assert classify_failure(124, True, BNB_UNDEFINED_SYMBOL + "ModuleNotFoundError: No module named 'x'") == "timeout"


def test_torchrun_wrapper_is_explained_by_the_childs_error():
    """torchrun's own ChildFailedError ends the log; the rank's traceback before it is the cause."""
    log = NCCL_SHM_WARN + """\
[rank0]: Traceback (most recent call last):
[rank0]:   File "/work/repo/train_ddp.py", line 9, in <module>
[rank0]:     import deepspeed
[rank0]: ModuleNotFoundError: No module named 'deepspeed'
E0801 12:00:03.412000 140211 torch/distributed/elastic/multiprocessing/api.py:833] failed (exitcode: 1) local_rank: 0 (pid: 2211) of binary: /venv/bin/python
Traceback (most recent call last):
  File "/venv/bin/torchrun", line 8, in <module>
    sys.exit(main())
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train_ddp.py FAILED
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 2211)
============================================================
"""
    assert classify_failure(1, False, log) == "deps"


def test_nccl_shm_failure_at_init_is_infra_shm():
    """Field case F09 under DDP: NCCL's own error names the /dev/shm segment on its last line."""
    log = XFORMERS_NO_TRITON + "".join("[rank0]: " + line for line in tb(
        'File "/work/repo/train_ddp.py", line 30, in <module>', "  dist.all_reduce(t)",
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "
        "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5\n"
        "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.\n"
        "Last error:\nError while creating shared memory segment /dev/shm/nccl-vzIpS6 (size 5767520)").splitlines(True))
    assert classify_failure(1, False, log) == "infra_shm"


def test_a_multi_line_exception_message_is_read_whole():
    log = XFORMERS_NO_TRITON + tb(
        TRAIN, "  from transformers import LlamaForCausalLM",
        "RuntimeError: Failed to import transformers.models.llama.modeling_llama because of the following error "
        "(look up to see its traceback):\n/venv/lib/python3.10/site-packages/flash_attn_2_cuda.cpython-310-x86_64-"
        "linux-gnu.so: undefined symbol: _ZN3c104cuda9SetDeviceEi")
    assert classify_failure(1, False, log) == "native_ext_abi"


def test_sigkill_after_a_caught_traceback_is_oom():
    assert classify_failure(137, False, XFORMERS_NO_TRITON + "epoch 0 step 3 loss 1.9\n") == "oom"
    assert classify_failure(1, False, XFORMERS_NO_TRITON + tb(
        TRAIN, "  batch = next(it)", "RuntimeError: DataLoader worker (pid 77) is killed by signal: Killed.")) == "oom"


def test_without_an_error_event_the_ordered_scan_decides():
    assert classify_failure(1, False, BNB_UNDEFINED_SYMBOL) == "native_ext_abi"
    assert classify_failure(1, False, "step 1\nstep 2\n") == "runtime"
    assert classify_failure(137, False, "step 1\n") == "oom"


# ---------------------------------------------------------------- whose asset

@pytest.mark.parametrize(("error", "context", "category"), [
    # A declared asset missing from the harness's cache (ClearerVoice's checkpoint).
    (f"FileNotFoundError: [Errno 2] No such file or directory: '{ASSET_CACHE}/modelscope--clearervoice-studio/"
     "FRCRN_SE_16K/last_best_checkpoint.pt'", "", "infra_assets"),
    ("OSError: Error no file named pytorch_model.bin, model.safetensors, tf_model.h5, model.ckpt.index or "
     f"flax_model.msgpack found in directory {ASSET_CACHE}/huggingface/hub/models--x--y/snapshots/abc.", "", "infra_assets"),
    ("ConnectionError: Couldn't reach the Hugging Face Hub for dataset 'openai/gsm8k': Offline mode is enabled.",
     "", "infra_assets"),
    # A truncated file names no path; the log before it says where it came from.
    ("_pickle.UnpicklingError: invalid load key, 'v'.",
     f"loading weights from {ASSET_CACHE}/sam/sam_vit_b.pth\n", "infra_assets"),
    # The same errors for files the agent was to provide (a git-lfs pointer it never pulled).
    ("_pickle.UnpicklingError: invalid load key, 'v'.", "loading weights from checkpoints/sam_vit_b.pth\n", "assets"),
    ("FileNotFoundError: [Errno 2] No such file or directory: '/work/repo/data/train.jsonl'",
     f"tokenizer from {ASSET_CACHE}/huggingface\n", "assets"),
])
def test_an_asset_problem_is_infra_only_in_the_asset_cache(error, context, category):
    log = BNB_UNDEFINED_SYMBOL + context + tb(TRAIN, "  state = torch.load(path)", error)
    assert classify_failure(1, False, log) == category


def test_asset_cache_is_where_the_probe_phase_mounts_it():
    from reb_ray.trial.probe_phase import ASSETS_MOUNT

    assert ASSET_CACHE == ASSETS_MOUNT


def test_only_the_tail_is_scanned():
    log = "ModuleNotFoundError: No module named 'early'\n" + "x" * (SCAN_BYTES + 10)
    assert classify_failure(1, False, log) == "runtime"


def test_owners():
    assert owner_of("infra_shm") == "infra" and owner_of("insufficient_hardware") == "hardware"
    assert owner_of("infra_assets") == "infra" and owner_of("assets") == "agent"
    assert owner_of("deps") == "agent" and owner_of(None) is None
