"""What the `registries` network policy costs a download.

One sandbox per policy, created as trials create theirs (the host CA bundle mounted; `open` on
reb-ray-open behind the host guard, `registries` on the node's internal network with the
trial's egress proxy, `bridge` an explicit `network = "bridge"`: Docker's default bridge,
unguarded), then N times each (default 5), in rotating order: `pip download --no-deps --no-cache-dir` of one small
wheel from PyPI into a fresh directory. Prints the median, min and max seconds per policy, as
the exec's host-measured wall time (pip's start-up included, container start not).

Usage: python benchmarks/network_policy.py [N] [REQUIREMENT=six==1.16.0]
"""

from __future__ import annotations

import statistics
import sys

from reb_ray.models.sweep import SweepConfig
from reb_ray.trial.egress import TrialEgress
from reb_ray.sandbox import SandboxConfig
from reb_ray.sandbox.docker.docker_client import connect
from reb_ray.sandbox.docker.docker_sandbox import DockerSandbox
from reb_ray.sandbox.docker.image import require_image


def main(n: int = 5, requirement: str = "six==1.16.0") -> None:
    image = require_image(connect(), "minimal")
    boxes, egresses = {}, {}
    try:
        configs = {"open": SweepConfig(), "registries": SweepConfig(network_policy="registries"),
                   "bridge": SweepConfig(network="bridge")}
        for policy, config in configs.items():
            egresses[policy] = TrialEgress(config)
            base = SandboxConfig(image=image, ca_bundle=config.sandbox.ca_bundle, sweep_id="bench", trial_id=f"netpolicy-{policy}")
            boxes[policy] = DockerSandbox(egresses[policy].open(base))
            egresses[policy].attach(boxes[policy])
        times: dict[str, list[float]] = {policy: [] for policy in configs}
        order = list(configs)
        for i in range(n):
            for policy in order[i % 3:] + order[:i % 3]:
                result = boxes[policy].exec(["python3", "-m", "pip", "download", "-q", "--no-deps", "--no-cache-dir",
                                             "--disable-pip-version-check", "-d", f"/tmp/dl-{i}", requirement], timeout=300)
                if not result.ok:
                    raise SystemExit(f"{policy}: pip download failed: {result.output[-500:]}")
                times[policy].append(result.duration_s)
        for policy, values in times.items():
            print(f"{policy:<11} pip download {requirement}: median {statistics.median(values):.3f} s "
                  f"(min {min(values):.3f}, max {max(values):.3f}, n={n})")
        proxy = egresses["registries"].proxy
        print(f"registries: {proxy.allowed} connections allowed, {proxy.denied} denied")
        print(f"overhead (median): {statistics.median(times['registries']) - statistics.median(times['open']):+.3f} s")
    finally:
        for box in boxes.values():
            box.close()
        for egress in egresses.values():
            egress.close(None)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5, *(sys.argv[2:3] or []))
