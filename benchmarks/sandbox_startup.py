"""Sandbox start-up cost: reb-ray's DockerSandbox vs a bare `docker run --rm`.

Prints the median of N (default 20) of: create sandbox -> exec `true` -> close, and of
`docker run --rm <image> true`, measured alternately in the same run, and their ratio.
Usage: python benchmarks/sandbox_startup.py [N]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

from reb_ray.sandbox import SandboxConfig
from reb_ray.sandbox.docker.docker_client import connect
from reb_ray.sandbox.docker.docker_sandbox import DockerSandbox
from reb_ray.sandbox.docker.image import build_image


def main(n: int = 20) -> None:
    client = connect()
    image = build_image(client, "minimal").tag
    ours, bare = [], []
    for _ in range(n):
        start = time.perf_counter()
        with DockerSandbox(SandboxConfig(image=image, sweep_id="bench"), client) as sb:
            assert sb.exec("true").ok
        ours.append(time.perf_counter() - start)
        start = time.perf_counter()
        subprocess.run(["docker", "run", "--rm", image, "true"], check=True, capture_output=True)
        bare.append(time.perf_counter() - start)
    m_ours, m_bare = statistics.median(ours), statistics.median(bare)
    print(f"image: {image}")
    print(f"reb-ray sandbox create+exec(true)+close: median {m_ours:.3f} s over {n}")
    print(f"docker run --rm {image} true:            median {m_bare:.3f} s over {n}")
    print(f"ratio: {m_ours / m_bare:.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
