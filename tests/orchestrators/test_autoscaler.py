"""Which node types an autoscaler may still start, read from a real `ray up` bootstrap file."""

from __future__ import annotations

from reb_ray.orchestrators.autoscaler import joinable_node_types

AWS_LIKE = """
cluster_name: x
max_workers: 4
available_node_types:
  head:
    resources: {CPU: 8, memory: 22000000000, reb_ray_slot: 4}
    max_workers: 0
  gpu_worker:
    min_workers: 0
    max_workers: 4
    resources: {CPU: 48, GPU: 4, memory: 130000000000, reb_ray_slot: 8}
  unknown_shape:
    max_workers: 2
    resources: {}
head_node_type: head
"""


def test_joinable_types_are_those_with_workers_left_and_a_declared_shape(tmp_path):
    path = tmp_path / "ray_bootstrap_config.yaml"
    path.write_text(AWS_LIKE)
    (gpu,) = joinable_node_types(path)
    assert (gpu.node_id, gpu.cpus, gpu.gpus, gpu.slot_cap, gpu.memory_bytes) == ("type:gpu_worker", 48.0, 4, 8,
                                                                                  130000000000)


def test_no_file_or_a_broken_one_means_no_autoscaler(tmp_path):
    assert joinable_node_types(tmp_path / "missing.yaml") == []
    broken = tmp_path / "broken.yaml"
    broken.write_text("available_node_types: [: nope")
    assert joinable_node_types(broken) == []
