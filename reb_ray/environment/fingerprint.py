"""The hardware and runtime a trial was measured on, as trials-row columns.

Two runs on different clusters must be told apart by their rows alone, so every attempt
records the node's fingerprint: the GPUs (model, count, memory per GPU in bytes, compute
capability, driver version and the CUDA version that driver supports, all from
`nvidia-smi`), the container runtime and its version (the Docker daemon's, for the docker
provider; null for the local provider, which has none), the CPU model and logical CPU count
(/proc/cpuinfo, os.cpu_count) and the kernel release. What cannot be read is null, never
guessed: a node without `nvidia-smi` has null GPU columns (gpu_count 0 only when nvidia-smi ran
and listed no GPU). Mixed GPU models are joined with " + " in `gpu_model`, in index order of
first appearance. The GPU and CPU facts are read once per process (they do not change while a
node runs); the runtime version is asked of the daemon each time (it restarts across upgrades).
"""

from __future__ import annotations

import functools
import os
import platform
import shutil
import subprocess

from reb_ray.sandbox import capabilities_of

#: The trials-row columns this module fills, in schema order.
FINGERPRINT_COLUMNS = ("gpu_model", "gpu_count", "gpu_memory_bytes", "gpu_compute_capability", "gpu_driver_version",
                       "cuda_driver_version", "container_runtime", "container_runtime_version", "cpu_model",
                       "cpu_count", "kernel")
NVIDIA_SMI_TIMEOUT_S = 20.0


def _run(argv: list[str]) -> str | None:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def parse_gpu_query(text: str) -> dict:
    """Columns from `nvidia-smi --query-gpu=name,memory.total,compute_cap,driver_version
    --format=csv,noheader,nounits` (memory in MiB there, bytes here). A field nvidia-smi reports
    as "[N/A]" or that differs between GPUs of one model stays as the first GPU's."""
    rows = [[f.strip() for f in line.split(",")] for line in text.splitlines() if line.strip()]
    rows = [r for r in rows if len(r) >= 4]
    if not rows:
        return {"gpu_model": None, "gpu_count": 0, "gpu_memory_bytes": None, "gpu_compute_capability": None,
                "gpu_driver_version": None}
    models: list[str] = []
    for name, *_ in rows:
        if name not in models:
            models.append(name)
    name, memory, capability, driver = rows[0][:4]
    return {"gpu_model": " + ".join(models), "gpu_count": len(rows),
            "gpu_memory_bytes": int(float(memory)) * 1024 * 1024 if memory.replace(".", "", 1).isdigit() else None,
            "gpu_compute_capability": capability if capability[:1].isdigit() else None,
            "gpu_driver_version": driver if driver[:1].isdigit() else None}


def parse_cuda_version(text: str) -> str | None:
    """The "CUDA Version" of `nvidia-smi`'s banner or `nvidia-smi -q` (the newest CUDA the
    driver supports), else None."""
    for line in text.splitlines():
        if "CUDA Version" in line:
            value = line.split("CUDA Version", 1)[1].lstrip(" :").split()
            if value and value[0][:1].isdigit():
                return value[0]
    return None


def cpu_model(cpuinfo: str) -> str | None:
    """The first "model name" of /proc/cpuinfo's text (x86), else its "Model"/"CPU part" line
    (arm), else None."""
    for key in ("model name", "Model", "Hardware"):
        for line in cpuinfo.splitlines():
            if line.split(":", 1)[0].strip() == key and ":" in line:
                return line.split(":", 1)[1].strip() or None
    return None


@functools.lru_cache(maxsize=1)
def host_fingerprint() -> dict:
    """GPU, CPU and kernel columns of this node (cached for the process)."""
    columns: dict = {"gpu_model": None, "gpu_count": None, "gpu_memory_bytes": None, "gpu_compute_capability": None,
                     "gpu_driver_version": None, "cuda_driver_version": None}
    if shutil.which("nvidia-smi"):
        query = _run(["nvidia-smi", "--query-gpu=name,memory.total,compute_cap,driver_version",
                      "--format=csv,noheader,nounits"])
        if query is not None:
            columns.update(parse_gpu_query(query))
            banner = _run(["nvidia-smi"])
            columns["cuda_driver_version"] = parse_cuda_version(banner) if banner else None
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            columns["cpu_model"] = cpu_model(f.read())
    except OSError:
        columns["cpu_model"] = None
    columns["cpu_count"] = os.cpu_count()
    columns["kernel"] = platform.release() or None
    return columns


def runtime_columns(provider: str) -> dict:
    """container_runtime and container_runtime_version for a sandbox `provider`: its runtime
    ("docker", "podman") and the engine's version (null when the daemon does not answer); null for
    providers without a container runtime."""
    runtime = capabilities_of(provider).container_runtime
    if runtime is None:
        return {"container_runtime": None, "container_runtime_version": None}
    try:
        from reb_ray.sandbox import provider_class

        version = provider_class(provider).connect_engine(timeout=10).version().get("Version")
    except Exception:  # noqa: BLE001 - a fingerprint never fails a trial: unknown is null
        version = None
    return {"container_runtime": runtime, "container_runtime_version": version}


def fingerprint(provider: str) -> dict:
    """Every FINGERPRINT_COLUMNS value for a trial run with sandbox `provider` on this node."""
    return {**host_fingerprint(), **runtime_columns(provider)}
