"""cluster.yaml and cluster-aws.yaml are configs Ray accepts, set up nodes with the project's own
script and give every node the sandbox-slot resource reb-ray reads (no SSH here: that is
tests/test_cluster_up.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from ray.autoscaler._private.util import prepare_config, validate_config

from reb_ray.orchestrators.cluster_status import SLOT_RESOURCE

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", ["cluster.yaml", "cluster-aws.yaml"])
def test_ray_accepts_the_config_and_it_sets_nodes_up_with_setup_sh(name):
    raw = yaml.safe_load((ROOT / name).read_text())
    config = prepare_config(raw)  # what `ray up` does before validating
    validate_config(config)
    assert config["file_mounts"] == {"~/reb-ray": "."} and config["rsync_filter"] == [".gitignore"]
    assert any("~/reb-ray/scripts/setup.sh" in c for c in config["setup_commands"])
    assert any("reb-ray/.venv/bin" in c and ".bashrc" in c for c in config["setup_commands"])


def test_on_premises_nodes_start_with_gpus_and_sandbox_slots():
    config = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    assert config["provider"]["type"] == "local" and config["auth"]["ssh_user"] == "root"
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        (start,) = [c for c in config[key] if c.startswith("ray start")]
        assert re.search(r"--resources='\{\"%s\": \d+\}'" % SLOT_RESOURCE, start), start
        assert "--num-gpus=" in start and "--node-ip-address=" in start


def test_aws_gpu_workers_autoscale_and_every_node_type_has_slots():
    config = yaml.safe_load((ROOT / "cluster-aws.yaml").read_text())
    types = config["available_node_types"]
    assert all(SLOT_RESOURCE in t["resources"] for t in types.values())
    gpu = types["gpu_worker"]
    assert gpu["node_config"]["InstanceType"].startswith(("g", "p")) and gpu["min_workers"] < gpu["max_workers"]
