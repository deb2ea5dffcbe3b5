"""`reb-ray cluster status` lines (the command itself runs on a real cluster in tests/test_cluster_up.py)."""

from __future__ import annotations

from reb_ray.cli.cluster import node_line
from reb_ray.node.health import NodeHealth
from reb_ray.orchestrators.cluster_status import NodeStatus


def test_a_healthy_gpu_node_is_one_line_with_every_field():
    health = NodeHealth("gpu-a", ["NVIDIA H200", "NVIDIA H200"], None, "img", True, 120_400_000_000, 3)
    line = node_line(NodeStatus("n1", "10.0.0.2", 64.0, 2, 16, health))
    assert line == ("10.0.0.2  gpu-a  ok  gpus 2 x NVIDIA H200  slots 16  cpus 64  image ok  disk 120.4 GB free"
                    "  docker ok  trials running 3")


def test_a_broken_node_names_its_problems_and_unknowns_print_as_question_marks():
    health = NodeHealth("cpu-b", [], "Docker daemon not reachable", "img", None, None, None,
                        ["docker: Docker daemon not reachable"])
    line = node_line(NodeStatus("n2", "10.0.0.3", 8.0, 0, None, health))
    assert line == ("10.0.0.3  cpu-b  FAIL  gpus 0  slots -  cpus 8  image ?  disk ?  docker down  trials running ?"
                    "  -- docker: Docker daemon not reachable")


def test_a_node_that_did_not_answer_says_so():
    line = node_line(NodeStatus("n3", "10.0.0.4", 8.0, 1, 4, None, "no answer within 60 s"))
    assert line == "10.0.0.4  ?  FAIL  gpus 1  slots 4  cpus 8  no check: no answer within 60 s"
