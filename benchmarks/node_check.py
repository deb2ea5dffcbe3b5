"""Time the per-node check a sweep runs at start on a simulated cluster of
N raylets on this machine, with and without the docker sandbox's checks (reap, Docker, image),
and the cost of one read of the cluster's nodes (the driver polls it every 5 s).

    python benchmarks/node_check.py [--raylets 3] [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's reb_ray


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--raylets", type=int, default=3)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    import ray
    from ray.cluster_utils import Cluster

    from reb_ray.orchestrators.node_check import NodeChecks, NodeRequirements, alive_nodes, check_all
    from reb_ray.sandbox.docker.docker_client import connect
    from reb_ray.sandbox.docker.image import require_image

    image = require_image(connect())
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    for _ in range(args.raylets - 1):
        cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    try:
        # The docker one first: its first run starts each node's worker, as at a sweep's start.
        for label, req in (("docker sandbox (reap, Docker, image, disk)", NodeRequirements(image, 2 * 1024**3)),
                           ("sleep sandbox (disk, paths)", NodeRequirements(None, 2 * 1024**3))):
            times = []
            for _ in range(args.runs):
                start = time.monotonic()
                passed, failed = check_all(NodeChecks(req), alive_nodes())
                times.append(time.monotonic() - start)
                assert len(passed) == args.raylets and not failed, [v.reason for v in failed]
            print(f"{label}: {args.raylets} raylets, check at sweep start {statistics.median(times):.2f} s median "
                  f"({', '.join(f'{t:.2f}' for t in times)}; the first starts the nodes' workers)")
        polls = []
        for _ in range(20):
            start = time.monotonic()
            alive_nodes()
            polls.append(time.monotonic() - start)
        print(f"one read of the cluster's nodes: {statistics.median(polls) * 1000:.1f} ms median of 20")
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main()
