"""Slot shapes per node (issue 12, item 1; F19): pure."""

from __future__ import annotations

from reb_ray.scheduling.slot_plan import NodeCapacity, gpu_cap, plan_slots


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


def test_reb_ray_slot_caps_a_nodes_slots_and_marks_them():
    from reb_ray.scheduling.slot_plan import NodeCapacity, plan_slots

    capped, free = NodeCapacity("a", 16, 4, slot_cap=3), NodeCapacity("b", 4, 0)
    shapes = plan_slots([capped, free], 1.0, [1, 1, 1, 1, 0, 0, 0, 0, 0])
    on_a = [s for s in shapes if s.node_id == "a"]
    assert len(on_a) == 3 and all(s.gpu and s.capped for s in on_a)  # 3 of its 4 GPUs, no CPU slot left
    assert [s.capped for s in shapes if s.node_id == "b"] == [False] * 4


def test_hardware_refusal_rules():
    from reb_ray.scheduling.slot_plan import NodeCapacity, hardware_refusal

    small = NodeCapacity("a", 2, 0, memory_bytes=8 * 1024**3)
    assert "needs 8 CPU(s) per trial" in hardware_refusal([small], 8, None)
    # A node type that may still join and can hold it: no refusal.
    assert hardware_refusal([small, NodeCapacity("type:big", 16, 4)], 8, None) is None
    assert "16 GiB of memory" in hardware_refusal([small], 1, 16 * 1024**3)
    assert hardware_refusal([small, NodeCapacity("type:unknown-memory", 4, 0)], 1, 16 * 1024**3) is None
    assert "reb_ray_slot is 0" in hardware_refusal([NodeCapacity("z", 8, 0, slot_cap=0)], 1, None)
    assert hardware_refusal([small], 1, None) is None


def test_sharing_slots_hold_no_gpu_and_fill_the_cpu_room_of_every_usable_gpu_node():
    """Agent phases are not bounded by GPUs, only by CPUs; a node with fewer GPUs than the
    largest need still takes GPU trials (the dispatcher sends it those it can lease for)."""
    from reb_ray.scheduling.slot_plan import plan_shared_slots

    nodes = [NodeCapacity("a", cpus=6, gpus=2), NodeCapacity("b", cpus=4, gpus=1), NodeCapacity("c", cpus=4, gpus=0),
             NodeCapacity("d", cpus=4, gpus=2, gpus_usable=False)]
    shapes = plan_shared_slots(nodes, 1.0, [2] * 8 + [1] * 2 + [0] * 3)
    sharing = [s for s in shapes if s.shares_gpus]
    assert sorted(s.node_id for s in sharing) == ["a"] * 6 + ["b"] * 4  # more than the nodes' GPUs
    assert all(s.gpu for s in sharing)  # GPU trials' slots, for dispatch
    assert {s.node_id: s.node_gpus for s in sharing} == {"a": 2, "b": 1}  # what each node can lease
    assert sorted(s.node_id for s in shapes if not s.shares_gpus) == ["c", "c", "d"]  # the 3 CPU trials, round-robin
    assert all(s.node_gpus == 0 for s in shapes if not s.shares_gpus)
    assert len(plan_shared_slots(nodes, 1.0, [1] * 20, max_concurrent=5)) == 5
    # Only 2-GPU trials: the 1-GPU node could lease none of them all they need.
    assert {s.node_id for s in plan_shared_slots(nodes, 1.0, [2] * 20)} == {"a"}


def test_slots_are_asked_for_gpu_slots_first_one_node_after_another_in_turn():
    """Each node starts a few workers at a time: a node's whole set must not queue behind its own
    start-up while other nodes idle, and no CPU slot is asked for before every GPU slot."""
    from reb_ray.scheduling.slot_plan import start_order

    nodes = [NodeCapacity("a", cpus=4, gpus=3), NodeCapacity("b", cpus=3, gpus=2), NodeCapacity("c", cpus=2, gpus=0)]
    shapes = plan_slots(nodes, 1.0, [1] * 5 + [0] * 4)
    order = [(s.node_id, s.gpu, s.index) for s in start_order(shapes)]
    assert order == [("a", True, 0), ("b", True, 0), ("a", True, 1), ("b", True, 1), ("a", True, 2),
                     ("a", False, 3), ("b", False, 2), ("c", False, 0), ("c", False, 1)]
    assert sorted(start_order(shapes), key=shapes.index) == shapes  # the same slots, none lost or doubled
