"""Per-trial overhead of the sandbox hardening, and the package cache's speed.

1. Container start (create + first exec + remove) with today's options vs the hardened ones
   (no-new-privileges, capabilities, pids and memory limits) plus one pass of the limit
   watch (a writable-layer size and a pids read), median of N each, interleaved.
2. `pip install numpy` in a fresh sandbox: with no cache, then after the harness filled the
   read-only cache from a first trial (package_cache.fill), i.e. a second identical trial.

Prints the overhead ratio on its own line: `hardening_overhead_ratio=<hardened/today>`.
Run: python benchmarks/hardening.py [--n 20] [--skip-pip]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from reb_ray.models.sweep import SweepConfig
from reb_ray.sandbox import SandboxConfig
from reb_ray.sandbox.docker.docker_client import connect
from reb_ray.sandbox.docker.docker_sandbox import DockerSandbox, container_create_kwargs
from reb_ray.sandbox.docker.hardening import HARDENING_KEYS
from reb_ray.sandbox.docker.image import build_image
from reb_ray.sandbox.limits import LimitWatch
from reb_ray.sandbox import package_cache


def _start(client, config: SandboxConfig, hardened: bool) -> float:
    kwargs = container_create_kwargs(config, f"reb-ray-bench-{uuid.uuid4().hex[:8]}")
    if not hardened:
        for key in HARDENING_KEYS:
            kwargs.pop(key, None)
        kwargs.pop("mem_limit", None)
    t0 = time.monotonic()
    container = client.containers.run(**kwargs)
    try:
        container.exec_run(["true"])
        if hardened:
            sandbox = DockerSandbox.__new__(DockerSandbox)
            sandbox._client, sandbox.id, sandbox.config = client, container.id, config
            LimitWatch(sandbox, config.pids_limit, config.disk_quota_bytes).check()
        return time.monotonic() - t0
    finally:
        container.remove(force=True, v=True)


def _numpy_install(config: SandboxConfig, env: dict[str, str]) -> float:
    with DockerSandbox(config) as box:
        result = box.exec("python3 -m pip install --break-system-packages -q numpy", env=env, timeout=900)
        if not result.ok:
            raise SystemExit(f"numpy install failed: {result.output[-500:]}")
        return result.duration_s


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--skip-pip", action="store_true")
    args = parser.parse_args()
    client = connect()
    image = build_image(client, "minimal").tag
    config = SandboxConfig(image=image, sweep_id="bench", trial_id="hardening", memory_bytes=4 * 1024**3,
                           disk_quota_bytes=50 * 1024**3, ca_bundle=SweepConfig().sandbox.ca_bundle)
    today, hardened = [], []
    for _ in range(args.n):
        today.append(_start(client, config, hardened=False))
        hardened.append(_start(client, config, hardened=True))
    t, h = statistics.median(today), statistics.median(hardened)
    print(f"container start, median of {args.n}: today {t * 1000:.0f} ms, hardened + one watch pass {h * 1000:.0f} ms")
    print(f"hardening_overhead_ratio={h / t:.3f}")
    if args.skip_pip:
        return
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp)
        cold = _numpy_install(config, {"PIP_NO_CACHE_DIR": "1"})
        t0 = time.monotonic()
        fetched = package_cache.fill(cache, config, "3.11", ["numpy==" + _latest_numpy(config)])
        fill_s = time.monotonic() - t0
        warm_config = config.model_copy(update={"mounts": {str(cache): package_cache.CACHE_MOUNT}})
        warm = _numpy_install(warm_config, {"PIP_FIND_LINKS": package_cache.CACHE_MOUNT})
    print(f"pip install numpy: no cache {cold:.1f} s; second trial with the read-only cache {warm:.1f} s "
          f"(harness fill after the first: {fill_s:.1f} s, {fetched})")


def _latest_numpy(config: SandboxConfig) -> str:
    with DockerSandbox(config) as box:
        out = box.exec("python3 -m pip install --break-system-packages -q numpy >/dev/null && "
                       "python3 -c 'import numpy; print(numpy.__version__)'", timeout=900)
        return out.output.strip().splitlines()[-1]


if __name__ == "__main__":
    main()
