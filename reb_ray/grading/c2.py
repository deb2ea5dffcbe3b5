"""Grading C2 (CUDA alignment): a pure function of the raw record of probes/c2_probe.py.

C2 succeeds only when a real kernel ran on the device and matched the CPU (`is_available()`
alone is true for a build whose arch list lacks the device, which then fails at the first
kernel). A failure gets exactly one category, decided in this order (the order matters: a
CPU-only torch is `cpu_only_build` even on a node whose GPUs and driver are fine):

    no_framework        no torch, TensorFlow or JAX in the interpreter, or torch is installed
                        but `import torch` fails (the import error is the reason)
    cpu_only_build      torch.version.cuda is None (CPU or ROCm wheel); TF not built with CUDA;
                        JAX with no CUDA plugin and a CPU jaxlib
    (success)           the kernel ran and matched; with several devices, each other device's
                        capability must also be covered by the arch list
    driver_too_old      the build's CUDA is newer than the driver: PyTorch's warning at CUDA
                        init ("CUDA initialization: The NVIDIA driver on your system is too old
                        (found version 12080) ...", c10/cuda/CUDAFunctions.cpp) or the CUDA
                        runtime's cudaErrorInsufficientDriver text, anywhere in the record
    no_device           a CUDA build that sees no device (`device_count()` 0 or
                        `is_available()` False) and no driver-age text; also "Found no NVIDIA
                        driver on your system" (no driver in the sandbox at all, which is not
                        the age of a driver: a caller with no GPUs assigned relabels it
                        `insufficient_hardware`)
    arch_not_supported  a device capability the build has no code for (see `arch_supports`),
                        or PyTorch's own texts for it ("no kernel image is available", "is not
                        compatible with the current PyTorch installation")
    kernel_failed       anything else: the kernel raised, mismatched, crashed or timed out

No raw record (the interpreter does not exist, the sandbox is gone) is `not_run`, never a
failure. Every result carries the observed facts (c2_* keys) so a stricter re-grade is possible.
"""

from __future__ import annotations

import re

from reb_ray.grading.record_types import PROBE_RECORD_INVALID, conform, malformed_reason

C2_KEYS = (
    "c2_status", "failure_category", "reason", "c2_warning_text", "c2_torch_version", "c2_cuda_build",
    "c2_device_count", "c2_device_names", "c2_capability", "c2_arch_list",
)
C2_CATEGORIES = ("no_framework", "cpu_only_build", "driver_too_old", "no_device", "arch_not_supported", "kernel_failed")
#: Bound of c2_warning_text, in bytes of UTF-8.
WARNING_TEXT_BYTES = 4096
REASON_CHARS = 300

_DRIVER_TOO_OLD = re.compile(
    r"NVIDIA driver on your system is too old"  # PyTorch (c10/cuda/CUDAFunctions.cpp)
    r"|CUDA driver version is insufficient for CUDA runtime version"  # cudaErrorInsufficientDriver
    r"|CUDA_ERROR_INSUFFICIENT_DRIVER|cudaErrorInsufficientDriver"
    r"|driver's CUDA version is [\d.]+ which is older than",  # JAX
    re.I,
)
_NO_DRIVER = re.compile(r"Found no NVIDIA driver on your system", re.I)
_ARCH_TEXT = re.compile(
    r"no kernel image is available for execution on the device"
    r"|is not compatible with the current PyTorch installation"
    r"|does not include kernels for this GPU"
    r"|PyTorch no longer supports this GPU because it is too old",
    re.I,
)
# Compute capabilities whose code runs only on themselves (integrated GPUs: Jetson TX1/TX2/Xavier/
# Orin, Thor), after PyTorch's DEVICE_REQUIREMENT table in torch/cuda/__init__.py.
_EXACT_ONLY = {53, 62, 72, 87, 101}
_ARCH = re.compile(r"^(sm|compute)_(\d+)([a-z]?)$")


_FRAMEWORK = {"version": str, "import_error": str, "error": str, "gpu_error": str, "op_error": str, "op_ok": bool,
              "op_device": str, "built_with_cuda": bool, "gpus": list, "jaxlib_version": str, "cuda_plugins": list,
              "gpu_devices": list, "backend": str}
#: The fields of probes/c2_probe.py's record that the grader reads, and their JSON types.
RECORD_SHAPE = {
    "framework": str, "torch_present": bool, "probe_error": str, "python": str, "import_error": str, "kernel_error": str,
    "stderr_tail": str, "worker_error": str, "warnings": [str], "device_errors": [str], "torch_version": str,
    "cuda_build": str, "hip_build": str, "capabilities": [str], "arch_list": [str], "kernel_ok": bool,
    "device_names": [str], "device_count": int, "cuda_available": bool, "cuda_visible_devices": str,
    "tf": _FRAMEWORK, "jax": _FRAMEWORK,
}


def _cc(capability: str | None) -> int | None:
    """"9.0" -> 90, "10.0" -> 100, "12.1" -> 121; None when unparsable."""
    try:
        major, minor = str(capability).split(".")
        return int(major) * 10 + int(minor)
    except (ValueError, TypeError):
        return None


def arch_supports(arch_list: list[str], capability: str) -> bool | None:
    """Whether a build compiled for `arch_list` (torch.cuda.get_arch_list(), e.g. ["sm_80",
    "sm_90", "compute_90"]) has code for a device of `capability` ("X.Y"); None when unknown.

    CUDA's compatibility rules (CUDA C++ Programming Guide, "Binary Compatibility" and
    "Application Compatibility"): a cubin `sm_XY` runs on devices X.Z with Z >= Y (same major);
    PTX `compute_XY` is JIT-compiled by the driver for any device >= X.Y. Arch-specific targets
    (`sm_90a`, `compute_90a`) run only on exactly that capability; family targets (`sm_100f`)
    on the same major with a minor >= theirs. Integrated-GPU capabilities (_EXACT_ONLY) match
    only themselves. So ['sm_50', ..., 'sm_90'] does not support 10.0, unless some
    'compute_XY' with XY <= 100 is in the list.
    """
    device = _cc(capability)
    if device is None or not arch_list:
        return None
    for entry in arch_list:
        match = _ARCH.match(str(entry).strip())
        if not match:
            continue
        kind, code, suffix = match.group(1), int(match.group(2)), match.group(3)
        if code == device:
            return True
        if suffix == "a" or code in _EXACT_ONLY or device in _EXACT_ONLY:
            continue
        if kind == "compute" and suffix == "" and code < device:
            return True
        if code // 10 == device // 10 and code % 10 <= device % 10:
            return True
    return False


def _last_line(text: str | None) -> str:
    lines = [ln.strip() for ln in str(text or "").splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _texts(raw: dict) -> str:
    """Everything the probe heard, for the pattern checks."""
    parts = list(raw.get("warnings") or [])
    parts += [raw.get(k) or "" for k in ("import_error", "kernel_error", "stderr_tail", "worker_error")]
    parts += list(raw.get("device_errors") or [])
    for fw in ("tf", "jax"):
        sub = raw.get(fw)
        if isinstance(sub, dict):
            parts += [str(sub.get(k) or "") for k in ("import_error", "error", "gpu_error", "op_error")]
    return "\n".join(str(p) for p in parts)


def _warning_text(raw: dict) -> str | None:
    text = "\n".join(str(w) for w in raw.get("warnings") or [])
    if not text:
        return None
    data = text.encode("utf-8")
    return text if len(data) <= WARNING_TEXT_BYTES else data[:WARNING_TEXT_BYTES].decode("utf-8", "ignore")


def _result(raw: dict | None, status: str, category: str | None, reason: str) -> dict:
    raw = raw or {}
    caps = raw.get("capabilities") or []
    return {
        "c2_status": status,
        "failure_category": category,
        "reason": " ".join(reason.split())[:REASON_CHARS],
        "c2_warning_text": _warning_text(raw),
        "c2_torch_version": raw.get("torch_version"),
        "c2_cuda_build": raw.get("cuda_build"),
        "c2_device_count": raw.get("device_count"),
        "c2_device_names": [str(n) for n in raw.get("device_names") or []],
        "c2_capability": str(caps[0]) if caps and caps[0] is not None else None,
        "c2_arch_list": [str(a) for a in raw.get("arch_list") or []],
    }


def _driver_reason(texts: str) -> str:
    line = next((ln.strip() for ln in texts.splitlines() if _DRIVER_TOO_OLD.search(ln)), "")
    return "the NVIDIA driver is too old for this build: " + line


def grade_c2(raw: dict | None) -> dict:
    """C2 stage result from the raw probe record (the dict probes/c2_probe.py writes, or None).

    Returns a dict with exactly C2_KEYS: c2_status (success | failure | not_run),
    failure_category (one of C2_CATEGORIES, None unless failure), reason (one line, at most
    REASON_CHARS), c2_warning_text (the captured warnings joined by newlines, at most
    WARNING_TEXT_BYTES, None when there were none), c2_torch_version, c2_cuda_build,
    c2_device_count (None when unknown, never 0 for unknown), c2_device_names (list),
    c2_capability (device 0's "X.Y" or None), c2_arch_list (list). Missing fields count as
    absent (records of older probe versions grade); a record that is not a dict is not_run.
    Pure: `raw` is not modified. The rules and their sources are in this module's docstring.
    Fields of the wrong type count as absent (reb_ray.grading.record_types); a record the rules
    still cannot read is a failure `probe_record_invalid`. Never raises.
    """
    if raw is None:
        return _result(None, "not_run", None, "the C2 probe left no record (interpreter missing or sandbox gone)")
    if not isinstance(raw, dict):
        return _result(None, "not_run", None, "the C2 probe record is not a JSON object")
    raw = conform(raw, RECORD_SHAPE)
    try:
        return _grade(raw)
    except Exception as exc:  # noqa: BLE001 - an agent-shaped record must end as a verdict
        return _result(None, "failure", PROBE_RECORD_INVALID, malformed_reason("C2", exc))


def _grade(raw: dict) -> dict:
    framework = raw.get("framework")
    if framework == "torch" or raw.get("torch_present"):
        return _grade_torch(raw)
    if framework in ("tensorflow", "jax"):
        return _grade_other(raw, framework)
    if raw.get("probe_error"):
        return _result(raw, "not_run", None, f"the C2 probe failed: {raw['probe_error']}")
    python = raw.get("python") or "the interpreter"
    return _result(raw, "failure", "no_framework", f"no deep-learning framework (torch, tensorflow, jax) in {python}")


def _import_failed(raw: dict, framework: str, error: str) -> dict:
    """A framework that is installed but does not import: a too-old driver, or no framework."""
    if _DRIVER_TOO_OLD.search(error):
        return _result(raw, "failure", "driver_too_old", _driver_reason(error))
    return _result(raw, "failure", "no_framework", f"{framework} is installed but `import {framework}` failed: {_last_line(error)}")


def _grade_torch(raw: dict) -> dict:
    texts = _texts(raw)
    if raw.get("import_error"):
        return _import_failed(raw, "torch", raw["import_error"])
    version = raw.get("torch_version")
    if raw.get("cuda_build") is None:
        kind = f"a ROCm build (hip {raw['hip_build']})" if raw.get("hip_build") else "a CPU-only build"
        return _result(raw, "failure", "cpu_only_build", f"torch {version} is {kind}: torch.version.cuda is None")
    caps = raw.get("capabilities") or []
    arch = raw.get("arch_list") or []
    if raw.get("kernel_ok"):
        bad = [(i, c) for i, c in enumerate(caps) if i > 0 and arch_supports(arch, c) is False]
        if bad:
            i, cap = bad[0]
            return _result(raw, "failure", "arch_not_supported",
                           f"device {i} has capability {cap}, which torch {version}'s arch list {' '.join(arch)} does not cover")
        names = raw.get("device_names") or []
        return _result(raw, "success", None,
                       f"torch {version} (CUDA {raw['cuda_build']}) ran a 256x256 matmul on "
                       f"{names[0] if names else 'device 0'} (capability {caps[0] if caps else '?'})")
    if _DRIVER_TOO_OLD.search(texts):
        return _result(raw, "failure", "driver_too_old", _driver_reason(texts))
    if _NO_DRIVER.search(texts):
        return _result(raw, "failure", "no_device", "no NVIDIA driver in the sandbox: Found no NVIDIA driver on your system")
    if raw.get("device_count") == 0 or raw.get("cuda_available") is False:
        return _result(raw, "failure", "no_device",
                       f"torch {version} (CUDA {raw['cuda_build']}) sees no CUDA device (device_count "
                       f"{raw.get('device_count')}, CUDA_VISIBLE_DEVICES={raw.get('cuda_visible_devices')!r}): "
                       f"{_last_line(raw.get('kernel_error'))}")
    unsupported = [(i, c) for i, c in enumerate(caps) if arch_supports(arch, c) is False]
    if unsupported or _ARCH_TEXT.search(texts):
        cap = unsupported[0][1] if unsupported else (caps[0] if caps else "?")
        return _result(raw, "failure", "arch_not_supported",
                       f"capability {cap} is not covered by torch {version}'s arch list {' '.join(arch) or '(unknown)'}: "
                       f"{_last_line(raw.get('kernel_error'))}")
    return _result(raw, "failure", "kernel_failed",
                   f"the CUDA kernel failed: {_last_line(raw.get('kernel_error') or raw.get('worker_error')) or 'no result'}")


def _grade_other(raw: dict, framework: str) -> dict:
    """TensorFlow / JAX only environments: a GPU seen and a trivial op run on it."""
    subs = {name: raw.get(key) for name, key in (("tensorflow", "tf"), ("jax", "jax")) if isinstance(raw.get(key), dict)}
    for name, sub in subs.items():
        if sub.get("op_ok"):
            return _result(raw, "success", None,
                           f"{name} {sub.get('version')} ran a 256x256 matmul on {sub.get('op_device') or 'the GPU'}")
    sub = subs.get(framework) or {}
    version = sub.get("version")
    texts = _texts(raw)
    if sub.get("import_error"):
        return _import_failed(raw, framework, sub["import_error"])
    if framework == "tensorflow":
        if sub.get("built_with_cuda") is False:
            return _result(raw, "failure", "cpu_only_build", f"tensorflow {version} is not built with CUDA")
        gpus = sub.get("gpus") or []
    else:
        jaxlib = str(sub.get("jaxlib_version") or "")
        if not sub.get("cuda_plugins") and "cuda" not in jaxlib and not sub.get("gpu_devices"):
            return _result(raw, "failure", "cpu_only_build",
                           f"jax {version} has no CUDA plugin (jaxlib {jaxlib or '?'}): backend {sub.get('backend')}")
        gpus = sub.get("gpu_devices") or []
    if _DRIVER_TOO_OLD.search(texts):
        return _result(raw, "failure", "driver_too_old", _driver_reason(texts))
    if not gpus:
        detail = _last_line(sub.get("gpu_error") or sub.get("error"))
        return _result(raw, "failure", "no_device", f"{framework} {version} sees no GPU" + (f": {detail}" if detail else ""))
    if _ARCH_TEXT.search(texts):
        return _result(raw, "failure", "arch_not_supported", f"{framework} {version} has no code for this GPU: "
                       f"{_last_line(sub.get('op_error'))}")
    return _result(raw, "failure", "kernel_failed",
                   f"the {framework} GPU op failed: {_last_line(sub.get('op_error')) or 'no result'}")
