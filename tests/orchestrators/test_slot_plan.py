"""Slot shapes per node (issue 12, item 1; F19): pure."""

from __future__ import annotations

from reb_ray.orchestrators.slot_plan import NodeCapacity, gpu_cap, plan_slots


def _count(shapes, node=None, gpu=None):
    return sum(1 for s in shapes if (node is None or s.node_id == node) and (gpu is None or s.gpu == gpu))


def test_a_gpu_slot_per_gpu_and_cpu_slots_in_the_room_left():
    nodes = [NodeCapacity("a", cpus=6, gpus=2), NodeCapacity("b", cpus=6, gpus=2)]
    shapes = plan_slots(nodes, 1.0, [2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])
    assert _count(shapes, "a", True) == 2 and _count(shapes, "b", True) == 2
    assert _count(shapes, gpu=False) == 8  # 4 CPUs left on each node; 10 CPU trials want more
    assert gpu_cap(nodes, 1.0) == 2


def test_only_the_slots_the_trials_can_use():
    nodes = [NodeCapacity("a", cpus=8, gpus=4), NodeCapacity("b", cpus=8, gpus=2)]
    shapes = plan_slots(nodes, 1.0, [2, 2, 0])
    assert _count(shapes, "a", True) == 4 and _count(shapes, "b", True) == 0  # whole largest node first
    assert _count(shapes, gpu=False) == 1
    assert plan_slots(nodes, 1.0, [0, 0, 0], max_concurrent=2) == plan_slots(nodes, 1.0, [0, 0])


def test_cpus_bound_the_gpu_slots_and_a_node_without_a_gpu_runtime_gets_none():
    nodes = [NodeCapacity("a", cpus=2, gpus=4), NodeCapacity("b", cpus=8, gpus=8, gpus_usable=False)]
    assert gpu_cap(nodes, 1.0) == 2
    shapes = plan_slots(nodes, 1.0, [2, 2, 1])
    assert _count(shapes, "a", True) == 2 and _count(shapes, "b", True) == 0


def test_f19_no_node_can_hold_one_trial():
    nodes = [NodeCapacity("a", cpus=2, gpus=2), NodeCapacity("b", cpus=2, gpus=0)]
    assert plan_slots(nodes, 8.0, [0, 0, 1]) == []
    assert gpu_cap(nodes, 8.0) == 0


def test_sharing_slots_hold_no_gpu_fill_the_cpu_room_of_gpu_nodes_that_cover_the_largest_need():
    """Issue 12, item 5: agent phases are not bounded by GPUs, only by CPUs."""
    from reb_ray.orchestrators.slot_plan import plan_shared_slots

    nodes = [NodeCapacity("a", cpus=6, gpus=2), NodeCapacity("b", cpus=4, gpus=1), NodeCapacity("c", cpus=4, gpus=0),
             NodeCapacity("d", cpus=4, gpus=2, gpus_usable=False)]
    shapes = plan_shared_slots(nodes, 1.0, [2] * 8 + [1] * 2 + [0] * 3)
    sharing = [s for s in shapes if s.shares_gpus]
    assert {s.node_id for s in sharing} == {"a"} and len(sharing) == 6  # more than node a's 2 GPUs
    assert all(s.gpu for s in sharing)  # GPU trials' slots, for dispatch
    assert sorted(s.node_id for s in shapes if not s.shares_gpus) == ["b", "c", "d"]  # the 3 CPU trials
    assert len(plan_shared_slots(nodes, 1.0, [1] * 20, max_concurrent=5)) == 5
    assert {s.node_id for s in plan_shared_slots(nodes, 1.0, [1] * 20)} == {"a", "b"}  # 1-GPU trials fit node b too
