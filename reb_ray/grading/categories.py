"""Failure categories of a failed command stage, from the error that ended the run.

The rule, in order (`classify_failure`):

1. A stage that ran past its timeout is `timeout`.
2. The error that ended the run decides (reb_ray.grading.final_error: the last Python
   traceback's exception or the last fatal line, after the exceptions it was raised from and,
   for a launcher's wrapper such as torchrun's `ChildFailedError`, the child's error). Each of
   those is matched against the patterns below, the final error first; earlier warnings and
   errors are context only, so bitsandbytes' harmless `undefined symbol` warning before a
   `FileNotFoundError` gives `assets`, not `native_ext_abi`. If none matches: exit 137 is `oom`
   (SIGKILL with no timeout: the kernel's OOM killer is the usual sender), exit 127
   `entrypoint_not_found`, anything else `runtime`. When the final error is a Python traceback
   but the exit code is SIGKILL's, the kill came after it and ended the run: `oom`.
3. Only a log with no error event at all (a bare `undefined symbol` line and exit 1) falls back
   to scanning the whole tail with the same ordered patterns, then to the exit code.

Only the last `SCAN_BYTES` of the log are read. Patterns are ordered so that specific kinds
come before the generic ones they contain (`No module named 'x._ext'` is a missing compiled
extension, not a plain missing dependency). Every category has a test with real error text and
a misleading warning of another category before it (tests/grading/test_categories.py).

Assets: the asset cache (`$REB_RAY_ASSETS`, mounted read-only at `ASSET_CACHE`, with the Hub
cache `HF_HOME` under it) is filled by the harness (`reb-ray assets fetch`), and the probes run
offline. An asset problem is the infrastructure's unless the agent deleted or changed the file,
and the agent cannot touch the cache, so: a missing or unreadable file whose path is in the
cache, and a Hub file that offline mode cannot find (a declared asset the cache lacks, or one
the task spec fails to declare), are `infra_assets`; a missing or corrupt file anywhere else (a
dataset or checkpoint the agent was to provide, or deleted) is `assets`, the agent's. A corrupt
file whose error names no path (`invalid load key`) is the cache's when the log before the error
names the cache. A model id the agent edited into the code also fails offline; `repo_modified`
in the trials row tells that case apart.

Agent categories: deps, system_deps (a native library missing from the OS), native_ext_abi, missing_compiled_ext, assets, oom, timeout,
entrypoint_not_found, runtime; and, for stages the agent left nothing to measure with
(reb_ray.grading.unmeasured): missing_report, invalid_report, sandbox_broken_by_agent,
interpreter_missing, interpreter_broken; unverified_run (a command stage whose command succeeded
but left no valid witness that the pinned repository's code ran in the reported interpreter:
reb_ray.grading.witness); and, when a sandbox limit ended the agent phase
(reb_ray.sandbox.limits): pids_limit, disk_quota, oom. Hardware: insufficient_hardware (decided by the caller from the
GPU count, never from logs). Infrastructure (`infra_*`, never scored against the agent, retried):
infra_shm (a /dev/shm too small for DataLoader workers or NCCL), infra_disk_full (ENOSPC), infra_assets (above),
plus the kinds the harness raises itself: infra_assets_missing, infra_daemon, infra_clone,
infra_sandbox, infra_toolbox, infra_toolchain, infra_node, infra_harness, infra_probe_misconfigured,
infra_network_guard (the host guard of a docker sandbox's network cannot be installed: reb_ray.netpolicy.hostguard).

Whose each category is (agent, hardware, infra) is said once, by `reb_ray.grading.vocabulary.Category`;
`owner_of` raises for a string that is no category instead of charging the agent.
"""

from __future__ import annotations

import re

from reb_ray.grading.final_error import final_errors, strip_prefixes
from reb_ray.grading.vocabulary import Category, Owner, owner_of

SCAN_BYTES = 16 * 1024

#: Categories by owner, from the one table that says whose each is (`Category`).
AGENT_CATEGORIES = tuple(c.value for c in Category if c.owner is Owner.AGENT)
HARDWARE_CATEGORIES = tuple(c.value for c in Category if c.owner is Owner.HARDWARE)
INFRA_CATEGORIES = tuple(c.value for c in Category if c.owner is Owner.INFRA)

#: Where the probe phase mounts the asset cache (probe_phase.ASSETS_MOUNT; a test keeps them equal).
ASSET_CACHE = "/opt/reb-ray/assets"
_IN_ASSET_CACHE = re.compile(re.escape(ASSET_CACHE) + r"(?:/|\b)|\$\{?REB_RAY_ASSETS\b")
_QUOTED = re.compile(r"'([^'\n]+)'|\"([^\"\n]+)\"")
_BARE_PATH = re.compile(r"(?:^|\s)\.{0,2}/[^\s:,;]+")
_EXTENSION = re.compile(r"\.\w{1,12}$")
_CONTEXT_BYTES = 2048

_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("infra_shm", re.compile(
        r"unable to write to file </torch_\d+|DataLoader worker \(pid \d+\) is killed by signal: Bus error"
        r"|insufficient shared memory \(shm\)|Error while creating shared memory segment /dev/shm")),
    ("infra_disk_full", re.compile(r"No space left on device|\[Errno 28\]")),
    # A rank that never joins ends in the collective's or the store's own timeout: a hang, not a crash.
    ("timeout", re.compile(
        r"Watchdog caught collective operation timeout|ran for \d+ milliseconds before timing out"
        r"|DistStoreError: Timed out")),
    ("oom", re.compile(
        r"CUDA out of memory|CUDA error: out of memory|OutOfMemoryError|MemoryError|Cannot allocate memory|std::bad_alloc"
        r"|^(?:.*\bline \d+: +\d+ +)?Killed\b|is killed by signal: Killed|Signal 9 \(SIGKILL\) received", re.M)),
    ("native_ext_abi", re.compile(
        r"undefined symbol|operator \S+ does not exist|GLIBCXX_[\d.]+' not found"
        r"|was compiled against a different|numpy.core.multiarray failed to import|module compiled against ABI version"
        r"|compiled using NumPy 1\.x cannot be run in\s+NumPy 2")),
    # A Python package whose native part needs an OS library the environment lacks (apt, not pip).
    ("system_deps", re.compile(
        r"cannot open shared object file|Use your system package manager to install"
        r"|fatal error: [\w/.+-]+\.h: No such file")),
    ("missing_compiled_ext", re.compile(r"No module named '[\w.]+\._[\w]*'|cannot import name '_\w+' from partially initialized")),
    ("deps", re.compile(r"ModuleNotFoundError|No module named|ImportError|DistributionNotFound|PackageNotFoundError")),
    # The probes run offline (probe_phase.probe_env): a Hub file not in the cache is never the agent's.
    ("infra_assets", re.compile(
        r"LocalEntryNotFoundError|(?i:offline mode is enabled)|We couldn't connect to 'https://huggingface.co'"
        r"|reb-ray: missing asset")),
    ("entrypoint_not_found", re.compile(r"can't open file|No such file or directory: '[^']*\.py'|command not found|: not found$", re.M)),
    # A missing file, or one that exists but cannot be read as what it claims to be.
    ("assets", re.compile(
        r"FileNotFoundError|No such file or directory|\b(?:[Ff]ile|[Pp]ath|[Cc]heckpoint|[Dd]irectory)\b[^\n]*\bdoes not exist"
        r"|UnpicklingError: invalid load key|PytorchStreamReader failed|SafetensorError|HeaderTooLarge|BadZipFile"
        r"|Unable to load weights from|Unable to open file \(truncated file|Error no file named")),
]


def classify_failure(exit_code: int | None, timed_out: bool, log: str) -> str:
    """The category of a failed stage (rule in the module docstring). `log` is the stage output
    (only its last `SCAN_BYTES` are read); `exit_code` None means unknown."""
    if timed_out:
        return "timeout"
    tail = strip_prefixes(log[-SCAN_BYTES:])
    events = final_errors(tail)
    if not events:
        return _match(tail, "") or _by_exit_code(exit_code)
    if exit_code in (137, -9) and events[0].kind == "traceback":
        return "oom"
    for event in events:
        category = _match(event.text, tail[max(0, event.start - _CONTEXT_BYTES):event.start])
        if category:
            return category
    return _by_exit_code(exit_code)


def _match(text: str, context: str) -> str | None:
    """The first category whose pattern is in `text` (`context`: the log before it), with assets
    split by where the file is, judged on the line that matched."""
    for category, pattern in _PATTERNS:
        found = pattern.search(text)
        if found and category == "assets":
            start = text.rfind("\n", 0, found.start()) + 1
            end = text.find("\n", found.end())
            return _asset_owner(text[start:end if end >= 0 else len(text)], context + text[:start])
        if found:
            return category
    return None


def _asset_owner(text: str, context: str) -> str:
    """"infra_assets" when the bad file is in the asset cache, else "assets" (module docstring)."""
    if _IN_ASSET_CACHE.search(text):
        return "infra_assets"
    quoted = [a or b for a, b in _QUOTED.findall(text)]
    if _BARE_PATH.search(text) or any("/" in q or _EXTENSION.search(q) for q in quoted):
        return "assets"  # the error names its file, and the file is outside the cache
    return "infra_assets" if _IN_ASSET_CACHE.search(context) else "assets"


def _by_exit_code(exit_code: int | None) -> str:
    if exit_code in (137, -9):
        return "oom"  # SIGKILL with no timeout: the kernel's OOM killer is the usual sender
    if exit_code == 127:
        return "entrypoint_not_found"
    return "runtime"


__all__ = ["ASSET_CACHE", "AGENT_CATEGORIES", "HARDWARE_CATEGORIES", "INFRA_CATEGORIES", "SCAN_BYTES", "classify_failure", "owner_of"]
