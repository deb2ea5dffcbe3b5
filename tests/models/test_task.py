"""Task specs: the bundled demo suite loads, and every bad task file is one clear line."""

from __future__ import annotations

from pathlib import Path

import pytest

from reb_ray.errors import RebRayError
from reb_ray.suite.load import list_suites, load_suite, load_task, select_tasks
from reb_ray.models.task import NOT_DEFINED, TaskSpec, TaskSpecError
from reb_ray.paths import bundled_dir

DEMO_C0 = {"import-name-mismatch": 2, "numpy-trainer": 1, "pyproject-extra": 2, "torch-tiny": 1}
SHA = "0123456789abcdef0123456789abcdef01234567"

VALID = f"""
id = "bad-task"
suite = "s1"
category = "1_cpu"
c0_baseline_total = 3
source = {{ git = "https://github.com/owner/name.git", commit = "{SHA}" }}

[stages.cpu]
command = "python train.py"
timeout_s = 30

[stages.multi_gpu]
command = ["torchrun", "--nproc-per-node", "4", "train.py"]
launcher = "torchrun"
ranks = 4
success = {{ exit_code = 0, log_pattern = "rank \\\\d+ done" }}

[[assets]]
name = "ckpt"
kind = "model"
path = "models/ckpt.pt"
"""


@pytest.fixture
def tasks_root(tmp_path, monkeypatch) -> Path:
    """A tasks root in tmp_path, made the working directory so messages show relative paths."""
    monkeypatch.chdir(tmp_path)
    return tmp_path / "tasks"


def write_task(root: Path, text: str, suite: str = "s1", task_id: str = "bad-task") -> Path:
    path = root / suite / task_id / "task.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def error_line(path: Path) -> str:
    with pytest.raises(TaskSpecError) as info:
        load_task(path)
    message = str(info.value)
    assert "\n" not in message
    assert isinstance(info.value, RebRayError)
    return message


# -- the bundled demo suite ------------------------------------------------------------------


def test_demo_suite_loads_with_applicability_and_c0():
    assert "demo" in list_suites()
    tasks = load_suite("demo")
    assert [t.id for t in tasks] == sorted(DEMO_C0)
    for task in tasks:
        assert task.suite == "demo" and task.category == "1_cpu"
        assert task.c0_baseline_total == DEMO_C0[task.id]
        assert (task.supports_cpu, task.supports_single_gpu, task.supports_multi_gpu) == (True, False, False)
        # C2 needs a GPU: torch-tiny, the one demo task that keeps C2, is a 1-GPU trial.
        assert task.stages.cuda.applicable == (task.id == "torch-tiny")
        assert task.gpus_needed == (1 if task.id == "torch-tiny" else 0)
        assert task.stages.single_gpu.skip_reason == "demo suite is CPU-only"
        assert task.stages.multi_gpu.skip_reason == "demo suite is CPU-only"
        assert task.source.kind == "bundled" and task.source.owner_repo is None
        assert task.source.label == "bundled:repo"
        assert task.repo_path == task.task_dir / "repo" and task.repo_path.is_dir()
        assert task.task_dir == bundled_dir("tasks") / "demo" / task.id
        cpu = task.stages.cpu
        assert cpu.command.startswith("python ") and cpu.is_shell
        assert cpu.success.exit_code == 0 and cpu.success.log_pattern == "final loss"


def test_demo_repos_are_what_the_tasks_say():
    tasks = {t.id: t for t in load_suite("demo")}
    assert (tasks["numpy-trainer"].repo_path / "requirements.txt").read_text().split() == ["numpy"]
    assert (tasks["import-name-mismatch"].repo_path / "requirements.txt").read_text().split() == ["numpy"]
    assert "import yaml" in (tasks["import-name-mismatch"].repo_path / "train.py").read_text()
    assert (tasks["torch-tiny"].repo_path / "requirements.txt").read_text().split() == ["torch"]
    assert 'cli = ["click"]' in (tasks["pyproject-extra"].repo_path / "pyproject.toml").read_text()
    assert tasks["numpy-trainer"].stages.cpu.command.endswith("python train.py --config /tmp/reb-ray-out/tiny.json --steps 5")
    assert (tasks["numpy-trainer"].task_dir / "helpers" / "tiny_config.py").is_file()
    assert tasks["pyproject-extra"].stages.cpu.command.startswith("python -m tinyproj.main")


def test_demo_success_rule_matches_a_real_log():
    rule = load_suite("demo")[0].stages.cpu.success
    assert rule.matches(0, "step 1 loss 0.5\nfinal loss 0.1234\n")
    assert not rule.matches(1, "final loss 0.1")
    assert not rule.matches(0, "Traceback ...\nModuleNotFoundError: No module named 'yaml'")


# -- a valid file from scratch ---------------------------------------------------------------


def test_valid_git_task_parses_every_field(tasks_root):
    task = load_task(write_task(tasks_root, VALID))
    assert task.source.kind == "git" and task.source.owner_repo == "owner/name"
    assert task.source.commit == SHA and task.source.label == "owner/name"
    assert task.stages.cpu.timeout_s == 30.0 and task.stages.cpu.workdir == "."
    assert not task.stages.single_gpu.applicable and task.stages.single_gpu.skip_reason == NOT_DEFINED
    multi = task.stages.multi_gpu
    assert multi.ranks == 4 and multi.launcher == "torchrun" and not multi.is_shell
    assert multi.success.matches(0, "rank 3 done")
    assert task.gpus_needed == 4 and task.supports_multi_gpu and not task.supports_single_gpu
    assert [(a.name, a.kind, a.path) for a in task.assets] == [("ckpt", "model", "models/ckpt.pt")]
    assert task.task_dir == (tasks_root / "s1" / "bad-task").resolve()
    assert task.repo_path is None
    assert "task_dir" not in task.model_dump()


def test_side_logs_and_deviation_are_read_beside_the_command(tasks_root):
    text = VALID.replace('command = "python train.py"', 'command = "python train.py"\n'
                         'side_logs = ["/tmp/server.log", "out/helper.log"]\ndeviation = "exit 124 counts as success"')
    cpu = load_task(write_task(tasks_root, text)).stages.cpu
    assert cpu.side_logs == ["/tmp/server.log", "out/helper.log"] and cpu.deviation == "exit 124 counts as success"
    plain = load_task(write_task(tasks_root, VALID)).stages.cpu
    assert plain.side_logs == [] and plain.deviation is None


def test_a_streamed_pattern_verdict_decides_over_the_kept_log():
    rule = load_suite("demo")[0].stages.cpu.success
    assert rule.matches(0, "head [... 9 bytes dropped by reb-ray ...] tail", pattern_matched=True)
    assert not rule.matches(0, "final loss 0.1", pattern_matched=False)
    assert not rule.matches(1, "final loss 0.1", pattern_matched=True)


def test_missing_stage_tables_and_optional_c0(tasks_root):
    path = write_task(tasks_root, 'id = "bad-task"\nsuite = "s1"\ncategory = "x"\nsource = { bundled = "." }\n')
    task = load_task(path)
    assert task.c0_baseline_total is None and task.assets == []
    for stage in (task.stages.cpu, task.stages.single_gpu, task.stages.multi_gpu):
        assert not stage.applicable and stage.skip_reason == NOT_DEFINED
    # C2 applies unless a task opts out, and C2 needs a GPU: the trial holds one.
    assert task.stages.cuda.applicable and task.gpus_needed == 1
    off = load_task(write_task(tasks_root, path.read_text() + '[stages.cuda]\napplicable = false\nskip_reason = "CPU"\n'))
    assert off.gpus_needed == 0


def test_gpus_needed_single_gpu_only():
    task = TaskSpec.model_validate({
        "id": "t", "suite": "s", "category": "c",
        "source": {"git": "git@github.com:o/n.git", "commit": SHA.upper()},
        "stages": {"single_gpu": {"command": "python x.py"}},
    })
    assert task.gpus_needed == 1 and task.source.owner_repo == "o/n" and task.source.commit == SHA


# -- one-line errors -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("timeout_s = 30", "timeout_s = -5",
         "tasks/s1/bad-task/task.toml: stages.cpu.timeout_s = -5: Input should be greater than 0"),
        ("timeout_s = 30", "timout_s = 30",
         "tasks/s1/bad-task/task.toml: stages.cpu.timout_s = 30: unknown key; valid keys: applicable, "
         "skip_reason, command, env, workdir, timeout_s, success, side_logs, deviation"),
        ("timeout_s = 30", 'timeout_s = 30\nside_logs = ["../escape.log"]',
         "tasks/s1/bad-task/task.toml: stages.cpu.side_logs = [\"../escape.log\"]: side log '../escape.log' must be "
         "a file path without '..'"),
        ("timeout_s = 30", 'timeout_s = 30\ndeviation = " "',
         'tasks/s1/bad-task/task.toml: stages.cpu.deviation = " ": deviation must say what differs (or be left out)'),
        ('command = "python train.py"\n', "",
         "tasks/s1/bad-task/task.toml: stages.cpu.command: Field required when the stage is applicable"),
        (f'commit = "{SHA}"', 'commit = "abc123"',
         'tasks/s1/bad-task/task.toml: source.commit = "abc123": must be a full commit sha (40 hex characters)'),
        ('log_pattern = "rank', 'log_pattern = "rank (',
         "tasks/s1/bad-task/task.toml: stages.multi_gpu.success.log_pattern = "),
        ("ranks = 4", "ranks = 1",
         "tasks/s1/bad-task/task.toml: stages.multi_gpu.ranks = 1: Input should be greater than or equal to 2"),
        ('launcher = "torchrun"', 'launcher = "mpirun"',
         'tasks/s1/bad-task/task.toml: stages.multi_gpu.launcher = "mpirun": Input should be'),
        ('kind = "model"', 'kind = "weights"', 'tasks/s1/bad-task/task.toml: assets[0].kind = "weights": Input should be'),
        ('id = "bad-task"', 'id = "other"',
         "tasks/s1/bad-task/task.toml: id = \"other\": must equal the directory name 'bad-task'"),
        ('suite = "s1"', 'suite = "demo"',
         "tasks/s1/bad-task/task.toml: suite = \"demo\": must equal the directory name 's1'"),
        ("c0_baseline_total = 3", "c0_baseline_total = -1",
         "tasks/s1/bad-task/task.toml: c0_baseline_total = -1: Input should be greater than or equal to 0"),
        ('path = "models/ckpt.pt"', 'path = "/abs/ckpt.pt"',
         'tasks/s1/bad-task/task.toml: assets[0].path = "/abs/ckpt.pt": path must be a relative path'),
        ("[stages.cpu]\n", "[stages.cpu]\nworkdir = \"../up\"\n",
         'tasks/s1/bad-task/task.toml: stages.cpu.workdir = "../up": workdir must be a relative path'),
        ("[stages.multi_gpu]\n", "[stages.multi_gpu]\napplicable = false\n",
         "tasks/s1/bad-task/task.toml: stages.multi_gpu.skip_reason: Field required when applicable = false"),
        ("[stages.cpu]\n", "[stages.cpu]\nskip_reason = \"why\"\n",
         'tasks/s1/bad-task/task.toml: stages.cpu.skip_reason = "why": only allowed when applicable = false'),
        ('command = "python train.py"', 'command = "  "',
         'tasks/s1/bad-task/task.toml: stages.cpu.command = "  ": command must not be empty'),
        ("[stages.cpu]\n", "[stages.cpu]\nranks = 2\n",
         "tasks/s1/bad-task/task.toml: stages.cpu.ranks = 2: unknown key"),
        ('git = "https://github.com/owner/name.git"', 'git = "not a url"',
         'tasks/s1/bad-task/task.toml: source.git = "not a url": not a git URL'),
        (f', commit = "{SHA}"', "",
         "tasks/s1/bad-task/task.toml: source.commit: Field required with git"),
        ('category = "1_cpu"\n', 'category = "1_cpu"\ntask_dir = "/etc"\n',
         'tasks/s1/bad-task/task.toml: task_dir = "/etc": unknown key; the loader sets task_dir'),
        ('path = "models/ckpt.pt"', 'path = "models/ckpt.pt"\nstages = ["c3"]',
         'tasks/s1/bad-task/task.toml: assets[0].stages = ["c3"]: c3 does not apply to this task'),
        ('path = "models/ckpt.pt"', 'path = "models/ckpt.pt"\nstages = ["cpu"]',
         "tasks/s1/bad-task/task.toml: assets[0].stages[0] = \"cpu\": Input should be 'c1', 'c3' or 'c4'"),
        ('path = "models/ckpt.pt"', 'path = "models/ckpt.pt"\nstages = ["c1", "c1"]',
         'tasks/s1/bad-task/task.toml: assets[0].stages = ["c1", "c1"]: a stage is listed twice'),
    ],
)
def test_bad_field_is_one_line_naming_file_field_and_value(tasks_root, old, new, expected):
    assert old in VALID
    message = error_line(write_task(tasks_root, VALID.replace(old, new, 1)))
    assert message.startswith(expected), message


def test_both_source_kinds_is_an_error(tasks_root):
    text = VALID.replace(f'commit = "{SHA}"', f'commit = "{SHA}", bundled = "repo"')
    path = write_task(tasks_root, text)
    (path.parent / "repo").mkdir()
    message = error_line(path)
    assert message.startswith('tasks/s1/bad-task/task.toml: source = {"git": "https://github.com/owner/name.git"')
    assert message.endswith(": give exactly one of {git, commit} or {bundled}"), message


def test_commit_with_bundled_source_is_an_error(tasks_root):
    text = VALID.replace('git = "https://github.com/owner/name.git", ', 'bundled = "."')
    text = text.replace('bundled = "."commit', 'bundled = ".", commit')
    message = error_line(write_task(tasks_root, text))
    assert message.endswith(": commit only goes with git, not with bundled"), message


def test_bundled_path_must_exist(tasks_root):
    text = VALID.replace(f'git = "https://github.com/owner/name.git", commit = "{SHA}"', 'bundled = "repo"')
    path = write_task(tasks_root, text)
    assert error_line(path) == 'tasks/s1/bad-task/task.toml: source.bundled = "repo": no such path in the task directory'
    (path.parent / "repo").mkdir()
    assert load_task(path).repo_path == path.parent.resolve() / "repo"


def test_a_command_naming_a_missing_helper_is_an_error(tasks_root):
    text = VALID.replace('command = "python train.py"', 'command = "python $REB_RAY_HELPERS/gen/data.py && python train.py"')
    path = write_task(tasks_root, text)
    assert error_line(path) == ('tasks/s1/bad-task/task.toml: stages.cpu.command = "python $REB_RAY_HELPERS/gen/data.py '
                                '&& python train.py": uses $REB_RAY_HELPERS/gen/data.py but helpers/gen/data.py is not in '
                                'the task directory')
    (path.parent / "helpers" / "gen").mkdir(parents=True)
    (path.parent / "helpers" / "gen" / "data.py").write_text("print('one sample')\n")
    assert "REB_RAY_HELPERS" in load_task(path).stages.cpu.command


def test_hf_cache_assets_live_under_hf_home_in_the_hub_layout(tasks_root, tmp_path):
    text = VALID.replace('path = "models/ckpt.pt"', 'source = "hf://datasets/org/data"\nlayout = "hf_cache"')
    asset = load_task(write_task(tasks_root, text)).assets[0]
    assert (asset.path, asset.hf_repo, asset.cache_path) == (
        "huggingface", ("dataset", "org/data"), "huggingface/hub/datasets--org--data")
    cache = tmp_path / "cache"
    assert not asset.present_in(cache)
    repo = cache / asset.cache_path
    (repo / "snapshots" / "abc").mkdir(parents=True)
    assert not asset.present_in(cache)  # an empty snapshot is what an interrupted download leaves
    (repo / "snapshots" / "abc" / "data.json").write_text("{}")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc")
    assert asset.present_in(cache)
    bad = VALID.replace('path = "models/ckpt.pt"', 'path = "models/ckpt.pt"\nlayout = "hf_cache"')
    assert error_line(write_task(tasks_root, bad, task_id="bad-task")).startswith(
        "tasks/s1/bad-task/task.toml: assets[0] = ")


def test_include_patterns_only_go_with_hf_sources(tasks_root):
    bad = VALID.replace('path = "models/ckpt.pt"', 'path = "models/ckpt.pt"\ninclude = ["*.json"]')
    message = error_line(write_task(tasks_root, bad))
    assert message.startswith("tasks/s1/bad-task/task.toml: assets[0] = ") and message.endswith(
        'include (file patterns) only goes with source = "hf://..."'), message
    good = bad.replace('include = ["*.json"]', 'include = ["*.json"]\nsource = "hf://org/tok"')
    assert load_task(write_task(tasks_root, good)).assets[0].include == ["*.json"]


def test_several_errors_report_the_first_and_count_the_rest(tasks_root):
    text = VALID.replace("timeout_s = 30", "timeout_s = 0").replace("ranks = 4", "ranks = 0")
    message = error_line(write_task(tasks_root, text))
    assert message.startswith("tasks/s1/bad-task/task.toml: stages.cpu.timeout_s = 0: ")
    assert message.endswith("(+1 more)")


def test_toml_syntax_error_is_one_line_with_the_file(tasks_root):
    message = error_line(write_task(tasks_root, VALID.replace('category = "1_cpu"', "category = 1_cpu x")))
    assert message.startswith("tasks/s1/bad-task/task.toml: TOML syntax error: "), message
    assert "line 4" in message


def test_missing_file_is_one_line(tasks_root):
    message = error_line(tasks_root / "s1" / "nothing" / "task.toml")
    assert message.startswith("tasks/s1/nothing/task.toml: cannot read")


def test_long_values_are_truncated(tasks_root):
    message = error_line(write_task(tasks_root, VALID.replace('category = "1_cpu"', f'category = "1_cpu"\nzz = "{"x" * 500}"')))
    assert message.startswith('tasks/s1/bad-task/task.toml: zz = "xxx') and len(message) < 400


# -- suites ----------------------------------------------------------------------------------


def test_load_suite_sorted_and_unknown_suite_lists_valid(tasks_root):
    for task_id in ("zeta", "alpha"):
        write_task(tasks_root, VALID.replace('"bad-task"', f'"{task_id}"'), task_id=task_id)
    (tasks_root / "s2").mkdir()
    assert list_suites(tasks_root) == ["s1", "s2"]
    assert [t.id for t in load_suite("s1", tasks_root)] == ["alpha", "zeta"]
    assert load_suite("s2", tasks_root) == []
    with pytest.raises(TaskSpecError) as info:
        load_suite("s3", tasks_root)
    assert str(info.value) == "unknown suite 's3' in tasks; valid: s1, s2"


def test_task_dir_without_task_toml_is_an_error(tasks_root):
    (tasks_root / "s1" / "stray").mkdir(parents=True)
    with pytest.raises(TaskSpecError, match=r"^tasks/s1/stray: task directory has no task.toml$"):
        load_suite("s1", tasks_root)


def test_first_bad_task_in_a_suite_is_reported(tasks_root):
    write_task(tasks_root, VALID, task_id="bad-task")
    write_task(tasks_root, VALID.replace('"bad-task"', '"good"'), task_id="good")
    write_task(tasks_root, VALID.replace('"bad-task"', '"worse"').replace("ranks = 4", "ranks = 1"), task_id="worse")
    with pytest.raises(TaskSpecError, match=r"^tasks/s1/worse/task.toml: stages.multi_gpu.ranks = 1: "):
        load_suite("s1", tasks_root)


def test_missing_root_is_an_error(tmp_path):
    with pytest.raises(TaskSpecError, match="does not exist"):
        list_suites(tmp_path / "nope")


# -- selection -------------------------------------------------------------------------------


def test_select_tasks_patterns():
    tasks = load_suite("demo")
    ids = lambda sel: [t.id for t in sel]  # noqa: E731
    assert ids(select_tasks(tasks, None)) == ids(tasks)
    assert ids(select_tasks(tasks, "")) == ids(tasks)
    assert ids(select_tasks(tasks, "numpy-trainer")) == ["numpy-trainer"]
    assert ids(select_tasks(tasks, "*-t*")) == ["numpy-trainer", "torch-tiny"]
    assert ids(select_tasks(tasks, "torch-*, import-*")) == ["import-name-mismatch", "torch-tiny"]
    assert ids(select_tasks(tasks, "*,numpy-trainer")) == ids(tasks)  # no duplicates
    with pytest.raises(TaskSpecError):  # case-sensitive, like task ids on disk
        select_tasks(tasks, "NUMPY-*")


def test_select_tasks_pattern_matching_nothing_is_an_error():
    tasks = load_suite("demo")
    with pytest.raises(TaskSpecError, match=r"^task pattern 'numpy-traner' matches no task; ids: import-name-mismatch"):
        select_tasks(tasks, "numpy-*,numpy-traner")


def test_assets_name_the_stages_that_need_them(tasks_root):
    """Issue 9 item 7: by default every command stage needs every asset; a spec can say which."""
    task = load_task(write_task(tasks_root, VALID))
    assert task.assets[0].stages == ["c1", "c3", "c4"]
    assert [a.name for a in task.assets_needed_by("c1")] == ["ckpt"] and task.assets_needed_by("c2") == []
    task = load_task(write_task(tasks_root, VALID.replace('path = "models/ckpt.pt"', 'path = "models/ckpt.pt"\nstages = ["c4"]')))
    assert task.assets_needed_by("c1") == [] and [a.name for a in task.assets_needed_by("c4")] == ["ckpt"]


def test_researchenvbench_assets_name_their_stages():
    specs = {t.id: t for t in load_suite("researchenvbench")}
    assert {a.name: a.stages for a in specs["geeeekexplorer--nano-vllm"].assets} == {"Qwen3-0.6B": ["c3", "c4"]}
    assert {tuple(a.stages) for a in specs["krlabsorg--lettucedetect"].assets} == {("c1", "c3")}
