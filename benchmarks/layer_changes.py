"""The environment capture's file listing: read from the overlay layers vs the daemon's `docker diff`.

One sandbox of the minimal image gets a virtual environment with pip in it (about 1,700 new
paths, an agent's smallest install); then, alternately N times (default 10), the changes are listed by
`DockerSandbox.filesystem_changes` (the layers, on this host) and by the daemon's diff endpoint.
Prints each one's median wall seconds, the daemon's CPU seconds per call (from
/proc), and the ratio daemon / layers on its own line.
Usage: python benchmarks/layer_changes.py [N]   (as root, beside a local Docker daemon)
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

from reb_ray.sandbox import SandboxConfig
from reb_ray.sandbox.docker.docker_client import connect
from reb_ray.sandbox.docker.docker_sandbox import DockerSandbox
from reb_ray.sandbox.docker.image import build_image

WORK = "python3 -m venv /opt/venv"


def _dockerd_cpu_s() -> float:
    pid = subprocess.run(["pidof", "dockerd"], capture_output=True, text=True).stdout.split()[0]
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main(n: int = 10) -> None:
    client = connect()
    image = build_image(client, "minimal").tag
    with DockerSandbox(SandboxConfig(image=image, sweep_id="bench"), client) as sb:
        sb.exec(["bash", "-c", WORK], user="root", timeout=600)
        layers, daemon, daemon_cpu = [], [], []
        for _ in range(n):
            start = time.perf_counter()
            ours = sb.filesystem_changes()
            layers.append(time.perf_counter() - start)
            cpu, start = _dockerd_cpu_s(), time.perf_counter()
            theirs = client.api.diff(sb.id)
            daemon.append(time.perf_counter() - start)
            daemon_cpu.append(_dockerd_cpu_s() - cpu)
        assert {(e["Path"], e["Kind"]) for e in ours} == {(e["Path"], e["Kind"]) for e in theirs}
    m_layers, m_daemon = statistics.median(layers), statistics.median(daemon)
    print(f"image: {image}; {len(ours)} changed paths")
    print(f"from the layers:   median {m_layers:.3f} s over {n}")
    print(f"daemon's diff:     median {m_daemon:.3f} s over {n} (daemon CPU {statistics.median(daemon_cpu):.2f} s per call)")
    print(f"ratio: {m_daemon / m_layers:.1f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
