"""`trial show` and the viewer say whether a kept image is still on its node and whether the
sandbox's limits were enforced (`sandbox_limits_enforced`)."""

from __future__ import annotations

import socket
import subprocess

import pytest

from analysis.trial_view import show_trial
from reb_ray.environment.keep import image_presence
from reb_ray.testing import synthetic

GONE = "sha256:" + "0" * 64  # no image has this id


def _output(tmp_path, **rows: dict):
    attempts = []
    for task, update in rows.items():
        row, stages = synthetic.trial("heuristic", task, 0, "SSSS")
        row.update(env_keep_policy="successes", env_manifest_path="m.json.gz", **update)
        attempts.append((row, stages))
    synthetic.write(tmp_path, attempts)
    return tmp_path


def _viewer_page(out, trial_id: str) -> str:
    """The viewer's trial page as its server renders it (template and context, without HTTP)."""
    import reb_ray
    from reb_ray.viewer.data import Run
    from reb_ray.viewer.server import _environment, _trial_context

    ctx = _trial_context(Run(out), "syn", trial_id, None)
    return " ".join(_environment().get_template("trial.html.j2").render(
        version=reb_ray.__version__, output_dir=str(out), title=trial_id, **ctx).split())


def test_limits_enforced_or_not_are_said(tmp_path):
    out = _output(tmp_path, t1={"sandbox_limits_enforced": True, "sandbox_provider": "docker"},
                  t2={"sandbox_limits_enforced": False, "sandbox_provider": "podman"}, t3={"sandbox_limits_enforced": None})
    assert "sandbox  docker; memory, pids and CPU limits enforced" in show_trial(out, "heuristic/t1/0")
    assert "sandbox  podman; memory, pids and CPU limits NOT enforced" in show_trial(out, "heuristic/t2/0")
    assert "limits unknown (not recorded)" in show_trial(out, "heuristic/t3/0")
    assert "sandbox limits</dt><dd id=\"limits\">podman; memory, pids and CPU limits <strong>NOT enforced</strong>" \
        in _viewer_page(out, "heuristic/t2/0")
    assert "limits enforced</dd>" in _viewer_page(out, "heuristic/t1/0")


def test_an_image_kept_on_another_node_is_not_claimed_either_way(tmp_path):
    row = {"env_kept": True, "env_image_id": GONE, "node": "gpu-node-7"}
    there, why = image_presence(row)
    assert there is None and why.startswith("kept on node gpu-node-7, not this host")
    out = _output(tmp_path, t1={"env_kept": True, "env_image_id": GONE, "env_image_tag": "reb-ray/env:x", "node": "gpu-node-7"})
    assert "on gpu-node-7: its layer" in show_trial(out, "heuristic/t1/0") and "not checked from here" in show_trial(out, "heuristic/t1/0")


@pytest.mark.integration
def test_a_removed_image_is_said_gone_and_a_present_one_there(sandbox_image, tmp_path):
    """Real Docker: the sandbox image stands for a kept one that is still there; an id no image
    has for one removed since (trial show used to say "kept as image ..." regardless)."""
    present = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", sandbox_image], capture_output=True,
                             text=True, check=True).stdout.strip()
    here = socket.gethostname()
    out = _output(tmp_path, t1={"env_kept": True, "env_image_id": GONE, "env_image_tag": "reb-ray/env:gone", "node": here},
                  t2={"env_kept": True, "env_image_id": present, "env_image_tag": sandbox_image, "node": here})
    gone = show_trial(out, "heuristic/t1/0")
    assert f"kept as image reb-ray/env:gone" in gone and f"; the image is gone from node {here} (removed since)" in gone, gone
    assert "; still there" in show_trial(out, "heuristic/t2/0")
    assert f"<strong class=\"gone\">the image is gone from node {here} (removed since)</strong>" in _viewer_page(out, "heuristic/t1/0")
    assert "; still there" in _viewer_page(out, "heuristic/t2/0")
