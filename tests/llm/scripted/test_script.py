"""Scripts: validation with one-line errors naming file, field and value; repeats; usage sums."""

from __future__ import annotations

import json

import pytest

from reb_ray.llm.files import LLMFileError
from reb_ray.llm.scripted import load_script
from reb_ray.llm.usage import Usage


def write(tmp_path, text: str, name: str = "script.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_toml_and_json_scripts_load_the_same(tmp_path):
    toml = write(tmp_path, '''model = "m"
[[turns]]
kind = "tool"
command = "ls"
usage = { input_tokens = 10, cached_input_tokens = 4, output_tokens = 3, reasoning_tokens = 1 }
[[turns]]
kind = "error"
status = 429
repeat = 3
[[turns]]
kind = "message"
text = "done"
usage = { input_tokens = 20, output_tokens = 5 }
''')
    data = {"model": "m", "turns": [
        {"kind": "tool", "command": "ls", "usage": {"input_tokens": 10, "cached_input_tokens": 4, "output_tokens": 3,
                                                    "reasoning_tokens": 1}},
        {"kind": "error", "status": 429, "repeat": 3},
        {"kind": "message", "text": "done", "usage": {"input_tokens": 20, "output_tokens": 5}}]}
    from_json = load_script(write(tmp_path, json.dumps(data), "script.json"))
    from_toml = load_script(toml)
    assert from_toml == from_json
    assert [t.kind for t in from_toml.turns()] == ["tool", "error", "error", "error", "message"]
    assert from_toml.total_usage() == Usage(30, 4, 0, 8, 1)


@pytest.mark.parametrize(("text", "message"), [
    ('[[turns]]\nkind = "tool"\n', "turns[0] = {'kind': 'tool'}: Value error, give exactly one of command or arguments"),
    ('[[turns]]\nkind = "error"\nstatus = 200\n', "turns[0].status = 200: Input should be greater than or equal to 400"),
    ('[[turns]]\nkind = "message"\ntext = "x"\nusage = { input_tokens = 5, cached_input_tokens = 9 }\n',
     "turns[0].usage = {'input_tokens': 5, 'cached_input_tokens': 9}: Value error, cached_input_tokens + "
     "cache_write_tokens must not exceed input_tokens"),
    ('[[turns]]\nkind = "chat"\n', "does not match any of the expected tags: 'tool', 'message', 'error', 'hang'"),
    ('[[turns]]\nkind = "message"\ntext = "x"\ncolour = 1\n', "turns[0].colour = 1: Extra inputs are not permitted"),
    ("turns = []\n", "turns = []: List should have at least 1 item after validation, not 0"),
    ("turns = [\n", "TOML syntax error"),
])
def test_bad_scripts_are_one_line_naming_the_field(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(LLMFileError) as info:
        load_script(path)
    assert str(info.value).startswith(f"{path}: ") and message in str(info.value)
    assert "\n" not in str(info.value)


def test_a_missing_script_is_one_line(tmp_path):
    with pytest.raises(LLMFileError, match=r"nope.toml: cannot read: No such file"):
        load_script(tmp_path / "nope.toml")
