"""The viewer's computing children (reb_ray.viewer.child): what their answer becomes, from real
child processes."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from reb_ray.errors import RebRayError
from reb_ray.viewer.child import answer, child_env


def _answer_of(code: str) -> dict:
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return asyncio.run(answer(proc, "the test process"))


@pytest.mark.parametrize("code, says", [
    ("import sys; sys.stderr.write('boom'); sys.exit(3)", "the test process failed (exit 3): boom"),
    ("print('not json')", "the test process failed: its answer is not JSON"),
    ("print('[1, 2]')", "the test process failed: its answer is not a JSON object"),
    ("print('{\"error\": \"no trials/ dataset here\"}')", "no trials/ dataset here"),
])
def test_a_failed_child_is_one_error_naming_it(code, says, slow_process):
    with pytest.raises(RebRayError) as caught:
        _answer_of(code)
    assert str(caught.value).startswith(says)


def test_an_answer_is_the_object_printed_and_the_child_finds_this_code_first(slow_process):
    code = "import json, reb_ray; print(json.dumps({'from': reb_ray.__file__}))"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=child_env(), cwd="/")
    found = asyncio.run(answer(proc, "the test process"))["from"]
    assert found == sys.modules["reb_ray"].__file__
