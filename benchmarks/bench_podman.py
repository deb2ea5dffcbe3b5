"""Sandbox start, exec and removal on rootless Podman against Docker, median of N each.

Each round opens a sandbox of the provider from the same image (the harness's own create:
labels, hardening, limits), runs `true` in it, and closes it; the three steps are timed with
the host's monotonic clock, in seconds. Run as root on a node where the Docker daemon and a
Podman service (REB_RAY_PODMAN_SOCKET) both hold the sandbox image:

    PYTHONPATH=. python benchmarks/bench_podman.py --rounds 20
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from reb_ray.sandbox import SandboxConfig, open_sandbox
from reb_ray.sandbox.docker.image import image_tag


def measure(provider: str, image: str, rounds: int) -> dict[str, float]:
    """Median seconds of start, exec (`true`) and removal over `rounds` sandboxes of `provider`."""
    start, run, remove = [], [], []
    for i in range(rounds):
        t0 = time.monotonic()
        box = open_sandbox(provider, SandboxConfig(image=image, sweep_id="bench", trial_id=f"r{i}"))
        t1 = time.monotonic()
        assert box.exec(["true"]).ok
        t2 = time.monotonic()
        box.close()
        t3 = time.monotonic()
        start.append(t1 - t0)
        run.append(t2 - t1)
        remove.append(t3 - t2)
    return {"start_s": statistics.median(start), "exec_s": statistics.median(run), "remove_s": statistics.median(remove)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--profile", default="minimal")
    parser.add_argument("--providers", default="docker,podman")
    args = parser.parse_args()
    image = image_tag(args.profile)
    results = {p: measure(p, image, args.rounds) for p in args.providers.split(",")}
    print(json.dumps({"rounds": args.rounds, "image": image, "median": results}, indent=2))


if __name__ == "__main__":
    main()
