"""Failure categories of a failed command stage, from its exit code and a bounded log scan.

Patterns are checked in order on the last `SCAN_BYTES` of the log; the first match wins, so
specific kinds come before the generic ones they contain (`No module named 'x._ext'` is a
missing compiled extension, not a plain missing dependency). Every pattern has a test with a
real error line (tests/grading/test_categories.py).

Agent categories: deps, system_deps (a native library missing from the OS), native_ext_abi, missing_compiled_ext, assets, oom, timeout,
entrypoint_not_found, runtime. Hardware: insufficient_hardware (decided by the caller from the
GPU count, never from logs). Infrastructure (`infra_*`, never scored against the agent, retried):
infra_shm (a /dev/shm too small: field case F09), infra_disk_full (ENOSPC), plus the kinds the
harness raises itself: infra_daemon, infra_clone, infra_sandbox, infra_toolbox, infra_toolchain, infra_node,
infra_harness, infra_probe_misconfigured.
"""

from __future__ import annotations

import re

SCAN_BYTES = 16 * 1024

AGENT_CATEGORIES = ("deps", "system_deps", "native_ext_abi", "missing_compiled_ext", "assets", "oom", "timeout",
                    "entrypoint_not_found", "runtime", "sandbox_broken_by_agent")
HARDWARE_CATEGORIES = ("insufficient_hardware",)

_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("infra_shm", re.compile(
        r"unable to write to file </torch_\d+|DataLoader worker \(pid \d+\) is killed by signal: Bus error"
        r"|insufficient shared memory \(shm\)|Error while creating shared memory segment /dev/shm")),
    ("infra_disk_full", re.compile(r"No space left on device|\[Errno 28\]")),
    ("oom", re.compile(r"CUDA out of memory|OutOfMemoryError|MemoryError|Cannot allocate memory|std::bad_alloc")),
    ("native_ext_abi", re.compile(
        r"undefined symbol|operator \S+ does not exist|GLIBCXX_[\d.]+' not found"
        r"|was compiled against a different|numpy.core.multiarray failed to import|module compiled against ABI version")),
    # A Python package whose native part needs an OS library the environment lacks (apt, not pip).
    ("system_deps", re.compile(r"cannot open shared object file|Use your system package manager to install")),
    ("missing_compiled_ext", re.compile(r"No module named '[\w.]+\._[\w]*'|cannot import name '_\w+' from partially initialized")),
    ("deps", re.compile(r"ModuleNotFoundError|No module named|ImportError|DistributionNotFound|PackageNotFoundError")),
    ("assets", re.compile(
        r"LocalEntryNotFoundError|offline mode is enabled|We couldn't connect to 'https://huggingface.co'"
        r"|reb-ray: missing asset"
        r"|(FileNotFoundError|No such file)[^\n]*\.(pt|pth|ckpt|bin|safetensors|npz|npy|wav|jpg|jpeg|png|h5|onnx)\b")),
    ("entrypoint_not_found", re.compile(r"can't open file|No such file or directory: '[^']*\.py'|command not found|: not found$", re.M)),
]


def classify_failure(exit_code: int | None, timed_out: bool, log: str) -> str:
    """The category of a failed stage. `log` is the stage output (only its tail is scanned)."""
    if timed_out:
        return "timeout"
    tail = log[-SCAN_BYTES:]
    for category, pattern in _PATTERNS:
        if pattern.search(tail):
            return category
    if exit_code == 137:
        return "oom"  # SIGKILL with no timeout: the kernel's OOM killer is the usual sender
    if exit_code == 127:
        return "entrypoint_not_found"
    return "runtime"


def owner_of(category: str | None) -> str | None:
    """Who a failure category belongs to: "infra", "hardware", "agent", or None for no failure."""
    if category is None:
        return None
    if category.startswith("infra_"):
        return "infra"
    if category in HARDWARE_CATEGORIES:
        return "hardware"
    return "agent"
