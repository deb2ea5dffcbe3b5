"""No stage of a task is impossible by construction: the suite's 44 specs, and each rule firing."""

from __future__ import annotations

import pytest

from reb_ray.models.feasibility import impossible_stages, stage_gpus
from reb_ray.suite.load import load_suite
from reb_ray.models.task import TaskSpec
from reb_ray.testing.suite import write_task

SHA = "0123456789abcdef0123456789abcdef01234567"
OFF = {"applicable": False, "skip_reason": "not in this task"}


@pytest.fixture(scope="module")
def suite() -> list[TaskSpec]:
    return load_suite("researchenvbench")


def test_no_stage_of_the_44_tasks_is_impossible_by_construction(suite):
    assert len(suite) == 44
    for task in suite:
        needs = stage_gpus(task)
        # Every applicable stage's GPUs are within the trial's allotment (C2 >= 1, C3 1, C4 ranks).
        assert all(need <= task.gpus_needed for need in needs.values()), (task.id, needs, task.gpus_needed)
        assert needs.get("c2") == 1 and task.gpus_needed >= 1, task.id  # C2 applies to all 44, as in the paper
        for name in ("cpu", "single_gpu", "multi_gpu"):
            stage = getattr(task.stages, name)
            assert not stage.applicable or (stage.command and str(stage.command).strip()), (task.id, name)
        assert [f.line(task.id) for f in impossible_stages(task)] == [], task.id


def test_a_task_whose_only_gpu_stage_is_c2_gets_a_gpu(suite):
    city = next(t for t in suite if t.id == "c2g-dev--city2graph")
    assert not (city.supports_cpu or city.supports_single_gpu or city.supports_multi_gpu)
    assert city.stages.cuda.applicable and stage_gpus(city) == {"c2": 1} and city.gpus_needed == 1


def _task(stages: dict, assets: list | None = None) -> TaskSpec:
    full = {"cpu": OFF, "single_gpu": OFF, "multi_gpu": OFF, **stages}
    return TaskSpec.model_validate({"id": "t", "suite": "s", "category": "c",
                                    "source": {"git": "https://github.com/o/n", "commit": SHA},
                                    "stages": full, "assets": assets or []})


def _rules(task: TaskSpec) -> list[tuple[str, str]]:
    return [(f.stage, f.rule) for f in impossible_stages(task)]


def test_a_clean_spec_breaks_no_rule():
    task = _task({"cpu": {"command": "python x.py --data $REB_RAY_ASSETS/t/data", "success": {"log_pattern": "done"}},
                  "single_gpu": {"command": "python x.py --device cuda:0"},
                  "multi_gpu": {"command": "python x.py", "launcher": "torchrun", "ranks": 2}},
                 [{"name": "data", "kind": "dataset", "path": "t/data/a.csv"}])
    assert _rules(task) == []
    assert stage_gpus(task) == {"c1": 0, "c2": 1, "c3": 1, "c4": 2} and task.gpus_needed == 2


def test_devices_past_the_stage_allotment_are_impossible():
    task = _task({"cpu": {"command": "python x.py --device cuda:0"},
                  "single_gpu": {"command": "CUDA_VISIBLE_DEVICES=1 python x.py"},
                  "multi_gpu": {"command": "python x.py", "launcher": "torchrun", "env": {"CUDA_VISIBLE_DEVICES": "0,1"}}})
    assert _rules(task) == [("c1", "devices"), ("c3", "devices"), ("c4", "devices")]


def test_c4_rank_rules():
    twice = _task({"multi_gpu": {"command": "python -m torch.distributed.run --nproc_per_node=2 x.py",
                                 "launcher": "torchrun"}})
    too_many = _task({"multi_gpu": {"command": "torchrun --nproc-per-node 4 x.py", "launcher": "python", "ranks": 2}})
    own = _task({"multi_gpu": {"command": "torchrun --nproc-per-node 2 x.py --deepspeed cfg.json", "launcher": "python"}})
    assert _rules(twice) == [("c4", "ranks")] and _rules(too_many) == [("c4", "ranks")] and _rules(own) == []


def test_a_log_pattern_on_output_sent_elsewhere_is_impossible():
    hidden = _task({"cpu": {"command": "exec >/tmp/log 2>&1; python x.py", "success": {"log_pattern": "ok"}},
                    "single_gpu": {"command": "python x.py >/dev/null 2>&1", "success": {"log_pattern": "ok"}},
                    "multi_gpu": {"command": "--redirects 3 --log_dir /tmp/l x.py", "launcher": "torchrun",
                                  "success": {"log_pattern": "ok"}}})
    assert _rules(hidden) == [("c1", "output"), ("c3", "output"), ("c4", "output")]
    # Without a pattern the exit code alone decides, and a tee keeps torchrun's output.
    quiet_stderr = _task({"cpu": {"command": "python x.py 2>/dev/null", "success": {"log_pattern": "ok"}}})
    assert _rules(quiet_stderr) == []  # only stderr is dropped: the pattern can still be printed
    plain = _task({"cpu": {"command": "python x.py >/dev/null 2>&1"},
                   "multi_gpu": {"command": "--redirects 3 --tee 3 x.py", "launcher": "torchrun",
                                 "success": {"log_pattern": "ok"}}})
    assert _rules(plain) == []


def test_assets_a_stage_uses_must_list_that_stage():
    asset = {"name": "ckpt", "kind": "model", "path": "t/ckpt.pt", "stages": ["c1"]}
    task = _task({"cpu": {"command": "python x.py --ckpt $REB_RAY_ASSETS/t/ckpt.pt"},
                  "single_gpu": {"command": "python x.py --ckpt ${REB_RAY_ASSETS}/t/ckpt.pt --other $REB_RAY_ASSETS/t/gone"}},
                 [asset])
    assert [f.detail for f in impossible_stages(task)] == [
        "uses $REB_RAY_ASSETS/t/ckpt.pt, which no asset listing c3 provides",
        "uses $REB_RAY_ASSETS/t/gone, which no asset listing c3 provides"]
    # An asset no applicable stage needs (its default stages, none applicable) is never checked before a run.
    unused = _task({}, [{"name": "ckpt", "kind": "model", "path": "t/ckpt.pt"}])
    assert _rules(unused) == [("c1,c3,c4", "assets")]


def test_an_allotment_that_ignores_c2_makes_city2graphs_c2_impossible(suite, monkeypatch):
    """The rule the suite test relies on fires: with an allotment counting only C3 and C4 (what
    a trial held before C2 counted), city2graph's C2 could only be insufficient_hardware."""
    def c3_c4_only(task: TaskSpec) -> int:
        needed = 1 if task.supports_single_gpu else 0
        return max(needed, task.stages.multi_gpu.ranks) if task.supports_multi_gpu else needed

    city = next(t for t in suite if t.id == "c2g-dev--city2graph")
    monkeypatch.setattr(TaskSpec, "gpus_needed", property(c3_c4_only))
    assert [f.line(city.id) for f in impossible_stages(city)] == [
        "c2g-dev--city2graph c2: gpus: needs 1 GPU(s), the trial holds 0"]
    assert [t.id for t in suite if impossible_stages(t)] == ["c2g-dev--city2graph"]


def test_tasks_validate_names_an_impossible_stage(tmp_path):
    """`reb-ray tasks validate` applies the rules: a task whose C1 reads an asset no asset
    declares for C1 is named, and the exit code is 1."""
    from tests.cli.in_process import run_cli

    def write(ckpt: str) -> None:
        write_task(tmp_path, "s1", "t", category="c", cpu='command = "python x.py --ckpt $REB_RAY_ASSETS/t/ckpt.pt"',
                   files={}, assets=[f'name = "ckpt", kind = "model", path = "{ckpt}", stages = ["c1"]'])

    write("t/ckpt.pt")
    run = ("tasks", "validate", "--tasks-root", str(tmp_path))
    ok = run_cli(*run)
    assert ok.returncode == 0 and ok.stdout.strip() == "s1: 1 task(s) ok", ok.stderr
    write("t/other.pt")
    bad = run_cli(*run)
    assert bad.returncode == 1
    assert bad.stdout.strip() == "s1: 1 task(s) loaded, 1 stage(s) impossible by construction"
    assert bad.stderr.strip() == "impossible: t c1: assets: uses $REB_RAY_ASSETS/t/ckpt.pt, which no asset listing c1 provides"
