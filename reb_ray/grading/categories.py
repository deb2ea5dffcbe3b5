"""Failure categories of a failed command stage, from its exit code and log tail.

Patterns are checked in order on the last `SCAN_BYTES` of the log (a bounded scan); the first
match wins. Categories (ARCHITECTURE.md, paper section on failure analysis): timeout, oom,
native_ext_abi, missing_compiled_ext, deps, assets, entrypoint_not_found, runtime.
"""

from __future__ import annotations

import re

SCAN_BYTES = 16 * 1024

_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("oom", re.compile(r"CUDA out of memory|OutOfMemoryError|MemoryError|Cannot allocate memory")),
    ("native_ext_abi", re.compile(r"undefined symbol")),
    ("missing_compiled_ext", re.compile(r"No module named '[\w.]+\._[\w]+'")),
    ("deps", re.compile(r"ModuleNotFoundError|No module named|ImportError|DistributionNotFound|PackageNotFoundError")),
    ("assets", re.compile(r"LocalEntryNotFoundError|offline mode is enabled|(FileNotFoundError|No such file)[^\n]*\.(pt|pth|ckpt|bin|safetensors|npz|wav|jpg|png)\b")),
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
