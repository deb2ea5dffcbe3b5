"""The agent prompt: the report contract, the rules, C0..C5 named, no probe or hidden command."""

from __future__ import annotations

import hashlib
import re

import pytest

from reb_ray.agents.base import REPORT_PATH
from reb_ray.agents.prompt import REPORT_FIELDS, render_prompt
from reb_ray.models.report import REPORT_KEYS
from reb_ray.suite.load import load_suite
from reb_ray.paths import bundled_dir
from reb_ray.testing.suite import write_task


@pytest.fixture(scope="module")
def all_tasks():
    return load_suite("demo") + load_suite("researchenvbench")


def test_report_fields_are_the_contracts_required_keys():
    assert [name for name, _kind, _what in REPORT_FIELDS] == list(REPORT_KEYS)


def test_prompt_states_the_contract_the_rules_and_the_checks():
    prompt = render_prompt(load_suite("demo")[0], REPORT_PATH)
    text = prompt.text
    assert REPORT_PATH in text and "/work/repo" in text
    for name, _kind, _what in REPORT_FIELDS:
        assert f"`{name}`" in text
    for stage in ("C0", "C1", "C2", "C3", "C4", "C5"):
        assert re.search(rf"^- {stage} ", text, re.MULTILINE), stage
    for rule in ("Do not modify tracked repository files", "exactly one Python interpreter", "Leave nothing running"):
        assert rule in text
    assert prompt.system and prompt.task and text.startswith(prompt.system.rstrip())
    assert prompt.sha256 == hashlib.sha256(text.encode()).hexdigest()
    assert "$" not in text  # every template placeholder was filled


def test_prompt_never_shows_a_stage_command_or_a_probe(all_tasks):
    probe_names = [p.name for p in bundled_dir("probes").glob("*.py")]
    for task in all_tasks:
        text = render_prompt(task, REPORT_PATH).text
        for stage in (task.stages.cpu, task.stages.single_gpu, task.stages.multi_gpu):
            command = stage.command if isinstance(stage.command, str) else " ".join(stage.command or [])
            assert not command or command not in text, (task.id, command)
        for name in probe_names:
            assert name not in text
        assert "REB_RAY_HELPERS" not in text and "pyright" not in text.lower()


def test_the_prompt_is_the_same_for_every_task_without_an_appendix(all_tasks):
    assert len({render_prompt(t, REPORT_PATH).sha256 for t in all_tasks if not t.prompt_appendix}) == 1


def test_a_task_appendix_is_appended_and_changes_the_hash():
    task = load_suite("demo")[0]
    plain = render_prompt(task, REPORT_PATH)
    noted = render_prompt(task.model_copy(update={"prompt_appendix": "The dataset is tiny; use CPU wheels."}), REPORT_PATH)
    assert noted.text.startswith(plain.text.rstrip()) and noted.text.rstrip().endswith("use CPU wheels.")
    assert noted.sha256 != plain.sha256


def test_prompt_appendix_is_a_task_toml_field(tmp_path):
    from reb_ray.models.task import TaskSpecError

    write_task(tmp_path, "mine", "numpy-trainer", header='prompt_appendix = "Prefer pip."')
    (task,) = load_suite("mine", tmp_path)
    assert task.prompt_appendix == "Prefer pip." and "Prefer pip." in render_prompt(task, REPORT_PATH).text
    write_task(tmp_path, "mine", "numpy-trainer", header='prompt_appendix = ""')
    with pytest.raises(TaskSpecError, match="prompt_appendix"):
        load_suite("mine", tmp_path)
