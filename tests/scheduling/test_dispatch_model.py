"""The benchmark's model of a sharing sweep accounts for every idle GPU-second, by cause.

`lease_idle` is what the scheduling benchmark prints as where the rig's rest goes; hand-worked
cases on one node with 2 GPUs and 2 sharing slots (one CPU per trial), in seconds.
"""

import pytest

from benchmarks.dispatch_model import Trial, lease_idle, simulate
from reb_ray.scheduling.slot_plan import NodeCapacity

NODE = [NodeCapacity("n", cpus=2, gpus=2)]


def _run(*trials: Trial):
    result = simulate(list(trials), NODE, 1.0, True)
    idle = lease_idle(result, NODE)
    held = sum(t.gpus * t.probe_s for t in trials)
    assert sum(idle.values()) == pytest.approx(2 * result.makespan - held)
    return result, idle


def test_a_probe_phase_behind_a_two_gpu_lease_idles_nothing_while_it_waits():
    # A leases both GPUs 10-15; B asks at 12 and waits with both GPUs held, then holds one 15-18.
    result, idle = _run(Trial("a", 2, 10, 5, 15, 1500), Trial("b", 1, 12, 3, 15, 1500))
    assert result.makespan == pytest.approx(18)
    assert idle == pytest.approx({"head": 20, "waiting": 0, "unfed": 3})


def test_a_two_gpu_probe_phase_waiting_for_its_second_gpu_counts_as_waiting():
    # A holds one GPU 10-20; B needs both, asks at 12 and gets them at 20: one GPU idles 12-20 for it.
    result, idle = _run(Trial("a", 1, 10, 10, 20, 1500), Trial("b", 2, 12, 5, 17, 1500))
    assert result.makespan == pytest.approx(25)
    assert idle == pytest.approx({"head": 20, "waiting": 8, "unfed": 2})
