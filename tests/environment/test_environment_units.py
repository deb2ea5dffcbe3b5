"""Unit tests of the environment artifacts: fingerprint parsing, capture summaries, keep
policy, export recipe, verify comparison, and the in-sandbox capture program on a real venv."""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from reb_ray.environment import capture, export, keep
from reb_ray.sweep import env_verify as verify
from reb_ray.environment.fingerprint import cpu_model, fingerprint, parse_cuda_version, parse_gpu_query
from reb_ray.results.schema import TRIALS_SCHEMA

NVIDIA_QUERY = "NVIDIA H100 80GB HBM3, 81559, 9.0, 550.54.15\nNVIDIA H100 80GB HBM3, 81559, 9.0, 550.54.15\n"
NVIDIA_BANNER = ("| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |\n")


def test_gpu_query_gives_model_count_memory_in_bytes_capability_and_driver():
    got = parse_gpu_query(NVIDIA_QUERY)
    assert got == {"gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 2, "gpu_memory_bytes": 81559 * 1024 * 1024,
                   "gpu_compute_capability": "9.0", "gpu_driver_version": "550.54.15"}
    mixed = parse_gpu_query("NVIDIA A100-SXM4-40GB, 40960, 8.0, 535.1\nTesla T4, 15360, 7.5, 535.1\n")
    assert mixed["gpu_model"] == "NVIDIA A100-SXM4-40GB + Tesla T4" and mixed["gpu_count"] == 2
    assert parse_gpu_query("")["gpu_count"] == 0 and parse_gpu_query("")["gpu_model"] is None
    assert parse_gpu_query("GPU X, [N/A], [N/A], 1.2\n")["gpu_memory_bytes"] is None


def test_cuda_version_and_cpu_model_are_read_not_guessed():
    assert parse_cuda_version(NVIDIA_BANNER) == "12.4"
    assert parse_cuda_version("CUDA Version                          : 12.2\n") == "12.2"
    assert parse_cuda_version("no such line") is None
    assert cpu_model("processor\t: 0\nmodel name\t: AMD EPYC 7763 64-Core Processor\n") == "AMD EPYC 7763 64-Core Processor"
    assert cpu_model("processor : 0\n") is None


def test_fingerprint_of_this_node_fills_every_column_in_the_schema():
    row = fingerprint("local")
    names = set(TRIALS_SCHEMA.names)
    assert set(row) <= names
    assert row["container_runtime"] is None and row["container_runtime_version"] is None  # local: no runtime
    assert row["kernel"] and row["cpu_count"] >= 1
    if not Path("/usr/bin/nvidia-smi").exists() and subprocess.run(["which", "nvidia-smi"], capture_output=True).returncode:
        assert row["gpu_model"] is None and row["gpu_count"] is None  # no nvidia-smi: unknown, never 0


def test_diff_summary_leaves_out_the_repository_and_keeps_deleted_paths():
    entries = [{"Path": "/work/repo", "Kind": 0}, {"Path": "/work/repo/x.py", "Kind": 1},
               {"Path": "/opt/envs/a/bin/python", "Kind": 1}, {"Path": "/etc/hosts.allow", "Kind": 2},
               {"Path": "/usr/lib/x", "Kind": 0}, {"Path": "/tmp/.reb-ray-env-capture/p.py", "Kind": 1}]
    summary, to_size = capture.summarise_diff(entries, "/work/repo", ignore=("/tmp/.reb-ray-env-capture",))
    assert summary == {"added": 1, "changed": 1, "deleted": 1, "deleted_paths": ["/etc/hosts.allow"]}
    assert to_size == ["/opt/envs/a/bin/python", "/usr/lib/x"]
    assert capture.summarise_diff(None, "/work/repo") == (None, [])


def test_dpkg_diff_names_added_removed_and_changed_packages():
    status = ("Package: curl\nStatus: install ok installed\nArchitecture: amd64\nVersion: 7.88\n\n"
              "Package: gone\nStatus: deinstall ok config-files\nArchitecture: amd64\nVersion: 1\n\n"
              "Package: libx\nStatus: install ok installed\nArchitecture: amd64\nVersion: 2\nDescription: a\n more\n")
    after = capture.parse_dpkg_status(status)
    assert after == {"curl:amd64": "7.88", "libx:amd64": "2"}
    image = {"libx:amd64": "1", "vim:amd64": "9"}
    assert capture.dpkg_diff(image, after) == {"added": {"curl:amd64": "7.88"}, "removed": {"vim:amd64": "9"},
                                               "changed": {"libx:amd64": ["1", "2"]}}
    assert capture.dpkg_diff(None, after) is None


def test_heuristic_log_gives_commands_with_their_exit_codes():
    log = ("[heuristic] $ python -m venv /opt/envs/h\n[heuristic] exit 0\nnoise\n"
           "[heuristic] $ pip install nope\n[heuristic] exit 1\n[heuristic] $ timeout thing\n")
    assert capture.commands_from_log(log) == [{"command": "python -m venv /opt/envs/h", "exit_code": 0},
                                              {"command": "pip install nope", "exit_code": 1},
                                              {"command": "timeout thing", "exit_code": None}]


def test_wheels_are_located_by_exact_version_and_compatible_tag_and_hashed(tmp_path):
    good = tmp_path / "numpy-2.0.0-cp311-cp311-manylinux_2_17_x86_64.whl"
    good.write_bytes(b"wheel bytes")
    (tmp_path / "numpy-2.0.0-cp312-cp312-manylinux_2_17_x86_64.whl").write_bytes(b"other python")
    (tmp_path / "six-1.16.0-py2.py3-none-any.whl").write_bytes(b"six")
    dists = [{"name": "numpy", "version": "2.0.0", "source": {"kind": "index"}},
             {"name": "six", "version": "1.17.0", "source": {"kind": "index"}},  # another version: no wheel
             {"name": "Six", "version": "1.16.0", "source": {"kind": "editable"}}]  # not from an index
    assert capture.locate_wheels(dists, [tmp_path], "3.11") == 1
    import hashlib
    assert dists[0]["wheel"] == {"file": good.name, "sha256": hashlib.sha256(b"wheel bytes").hexdigest()}
    assert "wheel" not in dists[1] and "wheel" not in dists[2]


def test_manifest_is_masked_before_it_is_stored():
    from reb_ray.redact import MASK

    data = capture.encode({"report": {"env": {"KEY": "sk-secret-value-123"}}}, ["sk-secret-value-123"])
    assert b"sk-secret-value-123" not in data
    assert json.loads(data)["report"]["env"]["KEY"] == MASK


def test_capture_program_describes_a_real_venv(tmp_path):
    prefix = tmp_path / "env"
    venv.EnvBuilder(with_pip=False).create(prefix)
    site = next(prefix.glob("lib/python*/site-packages"))
    dist = site / "demo_pkg-1.2.3.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.2.3\n")
    (dist / "INSTALLER").write_text("pip\n")
    (dist / "direct_url.json").write_text(json.dumps({"url": "file:///work/repo", "dir_info": {"editable": True}}))
    changed = tmp_path / "changed.txt"
    (prefix / "big.bin").write_bytes(b"x" * 5000)
    changed.write_text(f"{prefix / 'big.bin'}\n{prefix}\n/nonexistent/path\n")
    out = subprocess.run([sys.executable, str(capture.program_path()), str(prefix / "bin" / "python"), "/work/repo",
                          str(changed)], capture_output=True, text=True, check=True)
    got = json.loads(out.stdout)
    assert got["interpreter"]["prefix"] == str(prefix) and got["interpreter"]["venv"] is True
    assert "home" in got["interpreter"]["pyvenv_cfg"]
    demo = [d for d in got["distributions"] if d["name"] == "demo-pkg"]
    assert demo == [{"name": "demo-pkg", "version": "1.2.3", "installer": "pip", "requested": False,
                     "location": str(site), "shadowed": False, "source": {"kind": "editable", "url": "file:///work/repo"}}]
    assert sum(b for _, b in got["changed"].values()) == 5000
    assert any(a["path"].endswith("pyvenv.cfg") and a["sha256"] for a in got["activation"])
    broken = subprocess.run([sys.executable, str(capture.program_path()), str(tmp_path / "nope"), "/work/repo"],
                            capture_output=True, text=True, check=True)
    assert json.loads(broken.stdout)["interpreter"]["error"] and json.loads(broken.stdout)["distributions"] == []


def test_capture_runs_in_a_host_process_sandbox_too(tmp_path):
    """The local provider runs every command as the harness's own user: capture asks for no
    other user there (a container is entered as root)."""
    from reb_ray.sandbox import SandboxConfig, open_sandbox

    prefix = tmp_path / "env"
    venv.EnvBuilder(with_pip=False).create(prefix)
    with open_sandbox("local", SandboxConfig(), allow_unsafe=True) as sandbox:
        got = capture.run_program(sandbox, str(prefix / "bin" / "python"), str(tmp_path), [])
    assert got["interpreter"]["prefix"] == str(prefix) and got["interpreter"]["venv"] is True


def test_keep_policies():
    ok = [("c0", "success"), ("c1", "success")]
    c0_only = [("c0", "success"), ("c1", "failure")]
    scored, infra = {"status": "scored"}, {"status": "infra_error"}
    assert keep.wanted("successes", scored, ok) and not keep.wanted("successes", scored, c0_only)
    assert not keep.wanted("successes", infra, ok)
    assert keep.wanted("scored", scored, c0_only) and not keep.wanted("scored", infra, ok)
    assert keep.wanted("all", infra, []) and not keep.wanted("none", scored, ok)
    tag = keep.image_tag("demo-1", "heuristic/numpy-trainer/0", 2)
    assert len(tag) <= 128 and "/" not in tag and tag.startswith("demo-1-heuristic_numpy-trainer_0-a2-")
    assert keep.image_tag("demo-1", "heuristic/numpy-trainer/0", 1) != keep.image_tag("demo-1", "heuristic/numpy_trainer/0", 1)
    # two runs of one configuration (two output directories) never share a kept image's tag
    run_a, run_b = (keep.image_tag("demo-1", "heuristic/numpy-trainer/0", 1, run) for run in ("a47a7f6f", "bfb3dc90"))
    assert run_a != run_b and run_a != keep.image_tag("demo-1", "heuristic/numpy-trainer/0", 1)
    assert run_a.rsplit("-", 1)[0] == run_b.rsplit("-", 1)[0]  # the readable part stays the same


MANIFEST = {
    "trial_id": "heuristic/t/0", "attempt": 1, "sweep_id": "s", "repo_dir": "/work/repo",
    "report_path": "/opt/scimlopsbench/report.json",
    "image": {"tag": "reb-ray/sandbox:minimal-x", "id": "sha256:abc"},
    "interpreter": {"path": "/opt/envs/h/bin/python", "prefix": "/opt/envs/h", "base_prefix": "/usr", "venv": True,
                    "version": "3.11.2", "pyvenv_cfg": "home = /usr/bin\ninclude-system-site-packages = false\n"},
    "distributions": [
        {"name": "numpy", "version": "2.4.6", "location": "/opt/envs/h/lib/python3.11/site-packages",
         "source": {"kind": "index"}, "wheel": {"file": "numpy-2.4.6-cp311-cp311-x.whl", "sha256": "ab" * 32}},
        {"name": "tqdm", "version": "4.0", "location": "/opt/envs/h/lib/python3.11/site-packages", "source": {"kind": "index"}},
        {"name": "lib", "version": "0.1", "location": "/opt/envs/h/lib/python3.11/site-packages",
         "source": {"kind": "vcs", "url": "https://g/x.git", "vcs": "git", "commit_id": "deadbeef"}},
        {"name": "mine", "version": "0.0", "location": "/opt/envs/h/lib/python3.11/site-packages",
         "source": {"kind": "editable", "url": "file:///work/repo"}},
        {"name": "other", "version": "1", "location": "/opt/envs/h/lib/python3.11/site-packages",
         "source": {"kind": "editable", "url": "file:///opt/clone"}},
        {"name": "apt-thing", "version": "1", "location": "/usr/lib/python3/dist-packages", "source": None},
    ],
    "system_packages": {"added": {"libgl1:amd64": "1.6"}, "removed": {}, "changed": {}},
    "report": {"env": {"OMP_NUM_THREADS": "1"}},
}


def test_plan_and_dockerfile_pin_hash_and_redo_the_editable_install():
    steps = export.plan(MANIFEST)
    assert steps["hashed"] == [("numpy", "2.4.6", "ab" * 32, "numpy-2.4.6-cp311-cp311-x.whl")]
    assert steps["pinned"] == ["tqdm==4.0", "lib @ git+https://g/x.git@deadbeef"]
    assert steps["editable"] == ["/work/repo"]
    assert any("/opt/clone" in line for line in steps["not_captured"])
    text = export.dockerfile(MANIFEST, steps, has_wheels=True, report_name="report.json")
    assert text.splitlines()[3] == "FROM reb-ray/sandbox:minimal-x"
    assert "apt-get install -y --no-install-recommends libgl1=1.6" in text
    assert "RUN /usr/bin/python3.11 -m venv /opt/envs/h\n" in text
    assert "--force-reinstall --require-hashes --find-links /opt/reb-ray-env/wheels -r /opt/reb-ray-env/requirements.lock" in text
    assert "pip install --no-deps --find-links /opt/reb-ray-env/wheels -e /work/repo" in text
    assert 'ENV OMP_NUM_THREADS="1"' in text and "cp /opt/reb-ray-env/report.json /opt/scimlopsbench/report.json" in text
    # Every package hashed and wheels shipped: the hashed step needs no index.
    alone = {**MANIFEST, "distributions": MANIFEST["distributions"][:1]}
    assert "PIP_NO_INDEX=1 /opt/envs/h/bin/python -m pip install" in export.dockerfile(alone, export.plan(alone), True, None)


def test_verify_compares_every_stage_and_says_why():
    assert verify.compare({"c0": "success", "c1": "success", "c2": "skipped"},
                          {"c0": "success", "c1": "failure", "c2": "skipped"}) == ["c1: success -> failure"]
    assert verify.verdict_line({"built": True, "reproducible": True}) == "reproducible: yes"
    assert verify.verdict_line({"built": True, "reproducible": False, "differs": ["c1: success -> failure"]}) \
        == "reproducible: no (c1: success -> failure)"
    assert verify.verdict_line({"built": False}).startswith("reproducible: not attempted (the recipe does not build")


def test_export_of_an_unknown_trial_or_one_without_a_manifest_is_one_line(tmp_path):
    with pytest.raises(Exception, match="no trial|no trials"):
        export.find_attempt(tmp_path, "x/y/0")
    with pytest.raises(Exception, match="has no environment manifest: boom"):
        export.load_manifest(tmp_path, {"trial_id": "a/b/0", "attempt": 1, "env_capture_error": "boom"})


#: The system interpreter left as the image had it (a noop agent): pip, setuptools and wheel are
#: Debian's (no INSTALLER file), in a directory the filesystem diff never names.
SYSTEM = {
    **MANIFEST, "interpreter": {"path": "/usr/bin/python3", "prefix": "/usr", "base_prefix": "/usr", "venv": False,
                                "version": "3.11.2"},
    "distributions": [
        {"name": n, "version": v, "installer": None, "location": "/usr/lib/python3/dist-packages", "source": None}
        for n, v in (("pip", "23.0.1"), ("setuptools", "66.1.1"), ("wheel", "0.38.4"))],
    "filesystem": {"added": 5, "changed": 0, "deleted": 0, "deleted_paths": [], "groups_left_out": 0, "groups": [
        {"path": "/work/.reb-ray-agent/heuristic_script.py", "files": 1, "bytes": 23106},
        {"path": "/work/.reb-ray-agent/__pycache__", "files": 1, "bytes": 16438},
        {"path": "/opt/scimlopsbench/report.json", "files": 1, "bytes": 520},
        {"path": "/etc/ld.so.conf.d", "files": 1, "bytes": 30}]},
}


def test_the_images_own_packages_are_no_gap_and_unknown_is_never_none():
    assert export.plan(SYSTEM)["not_captured"] == []  # rebuilt by FROM
    # The same packages where the agent wrote (their directory in the diff) and no package diff
    # known: the recipe cannot tell, and says "unknown", not None.
    touched = {**SYSTEM, "system_packages": None, "filesystem": {**SYSTEM["filesystem"], "groups": [
        *SYSTEM["filesystem"]["groups"], {"path": "/usr/lib/python3", "files": 40, "bytes": 9000}]}}
    gaps = export.plan(touched)["not_captured"]
    assert gaps == [f"{n} {v}: installer unknown, source unknown"
                    for n, v in (("pip", "23.0.1"), ("setuptools", "66.1.1"), ("wheel", "0.38.4"))]
    # Debian's modules with the package diff known: the image's or the recipe's apt step's.
    assert export.plan({**touched, "system_packages": {"added": {}, "removed": {}, "changed": {}}})["not_captured"] == []
    # Installed by the agent in the venv with no installer recorded: still a gap.
    odd = {**MANIFEST, "distributions": [{"name": "x", "version": None, "installer": None, "source": None,
                                          "location": "/opt/envs/h/lib/python3.11/site-packages"}],
           "filesystem": {"groups": [{"path": "/opt/envs/h", "files": 1, "bytes": 1}], "groups_left_out": 0}}
    assert export.plan(odd)["not_captured"] == ["x unknown: installer unknown, source unknown"]


def test_readme_leaves_out_the_harness_files_and_the_report_it_puts_back():
    info = {"trial_id": "noop/t/0", "attempt": 1, "sweep_id": "s", "agent": "noop", "task_id": "t", "suite": "demo",
            "node": None, "stages": {"c0": "success"}, "locked_hashed": 0, "locked_unhashed": 0, "editable": [],
            "not_captured": export.plan(SYSTEM)["not_captured"], "report_put_back": SYSTEM["report_path"]}
    text = export.readme(SYSTEM, info)
    changed = text.split("not rebuilt by the recipe unless listed above):", 1)[1]
    assert "- /etc/ld.so.conf.d: 1 files, 30 bytes" in changed
    assert ".reb-ray-agent" not in changed and "report.json" not in changed
    assert "None" not in text and "on node `unknown`" in text and "- nothing the manifest knows of" in text
    assert "report is put back at\n`/opt/scimlopsbench/report.json`" in text
    # a system python with nothing installed: no prefix created, no lock, no wheels said
    assert "uses the image's own interpreter" in text and "installs no package" in text
    assert "wheels/" not in text and "creates the environment" not in text
    # No report stored: nothing puts it back, so the agent's report file is a change not rebuilt.
    bare = export.readme(SYSTEM, {**info, "report_put_back": None})
    assert "- /opt/scimlopsbench/report.json: 1 files, 520 bytes" in bare and "No report of the agent is put back" in bare


def test_an_image_removed_at_settle_leaves_its_columns_null(docker_client):
    """A committed image the policy does not keep is removed: its id, tag and sizes go null (the
    commit's time stays). Real Docker: the id is one the daemon does not hold (removed already,
    which removal accepts)."""
    from types import SimpleNamespace

    from reb_ray.environment.phase import EnvironmentPhase
    from reb_ray.models.sweep import SweepConfig
    from reb_ray.trial.result import StageRow
    from tests.test_repo_state import _recorder

    rec = _recorder()
    rec.result.settlement.status, rec.stages = "scored", [StageRow(stage="c1", status="failure")]
    phase = EnvironmentPhase(rec, SimpleNamespace(config=SweepConfig(keep_environments="successes")), [])
    phase.client, phase.image_id = docker_client, "sha256:" + "0" * 64
    rec.result.environment.set(env_image_id=phase.image_id, env_image_tag="reb-ray/env:x", env_image_bytes=28_672,
                               env_image_total_bytes=200_000_000, env_commit_s=0.4)
    phase.settle()
    assert rec.row["env_kept"] is False and rec.row["env_commit_s"] == 0.4 and rec.row["env_keep_error"] is None
    assert all(rec.row[c] is None for c in keep.IMAGE_COLUMNS)


def test_a_locked_pip_is_installed_first_and_left_out_of_the_rest():
    """kyegomez--multimodalmamba's reference recipe upgrades pip before it installs anything, so
    pip 26.0.1 wrote its packages' console scripts (bin/accelerate, bin/torchrun, ...); a rebuild
    that installed the whole lock with the venv's bundled pip 23 wrote them from another template,
    and `env verify` said `reproducible: no (files differ: bin/accelerate, ... and 21 more)`."""
    pip = ("pip", "26.0.1", "cd" * 32, "pip-26.0.1-py3-none-any.whl")
    steps = export.plan(MANIFEST)
    steps["hashed"].append(pip)
    runs = [line for line in export.dockerfile(MANIFEST, steps, has_wheels=True, report_name=None).splitlines()
            if "pip install" in line]
    assert f"'pip==26.0.1 --hash=sha256:{'cd' * 32}' > /tmp/reb-ray-pip.lock" in runs[0]
    assert "--force-reinstall --require-hashes --find-links /opt/reb-ray-env/wheels -r /tmp/reb-ray-pip.lock" in runs[0]
    assert runs[1].startswith("RUN grep -v -i '^pip==' /opt/reb-ray-env/requirements.lock > /tmp/reb-ray-rest.lock")
    assert runs[1].endswith("-r /tmp/reb-ray-rest.lock && rm -f /tmp/reb-ray-rest.lock")
    only = {**steps, "hashed": [pip]}
    assert [line for line in export.dockerfile(MANIFEST, only, True, None).splitlines()
            if "requirements.lock" in line and "pip install" in line] == []
