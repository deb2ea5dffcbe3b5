"""The harness's overhead inside one trial (target: <= 1 s beyond `docker run --rm IMAGE true`).

Runs N (default 10) attempts of the noop agent on the demo task numpy-trainer in Docker
sandboxes, in this process (`run_trial`, as a slot worker calls it; no Ray), alternating with
`docker run --rm IMAGE true`. Per attempt, the overhead is trial wall time minus the agent's
and the probes' own wall times (trial_wall_time_s - agent_wall_time_s - probe_wall_time_s):
preflight, placement, sandbox start, repository copy, the two repository states, the steps
between the phases and the sandbox's removal. Also prints the median of the parts it can time
from outside (each wrapped step's wall seconds). The headline is the last line, e.g.
`in-trial overhead beyond docker run --rm IMAGE true: 0.41 s (overhead 0.72 s, docker run 0.31 s, 2.3x)`.

Usage: python benchmarks/trial_overhead.py [N]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's reb_ray, not an installed one

from reb_ray.trial import prepare, run as trial_module  # noqa: E402
from reb_ray.models.sweep import SweepConfig, TrialSpec  # noqa: E402
from reb_ray.suite.load import load_suite  # noqa: E402
from reb_ray.sandbox.docker.docker_client import connect  # noqa: E402
from reb_ray.sandbox.docker.image import build_image  # noqa: E402

TASK = "numpy-trainer"
# The trial's steps timed from outside: (the phase module that calls it, attribute, label).
STEPS = [(prepare, "preflight", "preflight"), (prepare, "place_repo", "placement"),
         (prepare, "open_sandbox", "sandbox start"), (prepare, "tracked_state", "repo state (baseline)"),
         (trial_module, "run_agent_phase", "agent phase (harness + agent)"),
         (trial_module, "run_between_phases", "between phases"), (trial_module, "run_probe_phase", "probe phase")]


def timed_steps() -> dict[str, list[float]]:
    """Wrap the trial module's steps (and the sandbox's and egress's methods) so that each
    call's wall seconds are recorded."""
    from reb_ray.trial.egress import TrialEgress
    from reb_ray.sandbox.docker.docker_sandbox import DockerSandbox
    from reb_ray.sandbox.limits import LimitWatch

    seconds: dict[str, list[float]] = defaultdict(list)
    targets = list(STEPS) + [
        (DockerSandbox, "put", "repository copy (put)"), (DockerSandbox, "close", "sandbox removal"),
        (DockerSandbox, "exec", "each exec"), (TrialEgress, "open", "egress open"),
        (TrialEgress, "close", "egress close"), (LimitWatch, "__exit__", "limit watch stop")]
    for owner, attr, label in targets:
        inner = getattr(owner, attr)

        def wrapper(*args, _inner=inner, _label=label, **kwargs):
            started = time.perf_counter()
            try:
                return _inner(*args, **kwargs)
            finally:
                seconds[_label].append(time.perf_counter() - started)

        setattr(owner, attr, wrapper)
    return seconds


def bare_run(image: str) -> None:
    """`docker run --rm IMAGE true`; raises SystemExit with Docker's message when it fails."""
    done = subprocess.run(["docker", "run", "--rm", image, "true"], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"docker run --rm {image} true: exit {done.returncode}: {done.stderr.strip()[:300]}")


def main(n: int = 10) -> None:
    image = build_image(connect(), "minimal").tag
    task = next(t for t in load_suite("demo") if t.id == TASK)
    out = Path(tempfile.mkdtemp(prefix="reb-bench-trial-"))
    config = SweepConfig(sandbox="docker", output=out, wheelhouses=[], pip_cache=False)
    seconds = timed_steps()
    overhead, bare, sandbox_close = [], [], []
    for i in range(n + 1):  # the first attempt warms caches (bundled commit, client, pyright) and is left out
        spec = TrialSpec(sweep_id="bench-trial-overhead", agent="noop", task=task, trial_index=i, config=config, image=image)
        row = trial_module.run_trial(spec).trial
        if row["status"] != "scored":
            raise SystemExit(f"attempt {i}: {row['status']}: {row['failure_reason']}")
        started = time.perf_counter()
        bare_run(image)
        if i == 0:
            for values in seconds.values():
                values.clear()
            continue
        bare.append(time.perf_counter() - started)
        overhead.append(row["trial_wall_time_s"] - row["agent_wall_time_s"] - row["probe_wall_time_s"])
    print(f"{n} noop trials of {TASK} in Docker ({image}); medians, seconds:")
    for label, values in seconds.items():
        print(f"  {label}: {statistics.median(values):.3f}")
    o, b = statistics.median(overhead), statistics.median(bare)
    print(f"in-trial overhead (trial - agent - probe): {o:.3f} s; docker run --rm IMAGE true: {b:.3f} s")
    print(f"in-trial overhead beyond docker run --rm IMAGE true: {o - b:.2f} s (overhead {o:.2f} s, docker run {b:.2f} s,"
          f" {o / b:.1f}x)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
