"""The README quick start is exactly two commands, and CI runs the second one."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def quick_start_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```bash\n(.*?)```", section, re.S)]


def test_quick_start_is_two_commands_and_ci_runs_the_test_one():
    commands = quick_start_commands()
    assert len(commands) == 2 and all("\n" not in c for c in commands)
    assert "reb-ray" in commands[0]
    ci_lines = [line.strip() for line in (ROOT / ".ci/run").read_text().splitlines()]
    assert commands[1] in ci_lines


def test_the_scripted_endpoint_examples_load(tmp_path):
    """The README's script and sweep.toml for an LLM agent without a model are valid as written."""
    from reb_ray.cli.sweep import load_config
    from reb_ray.llm.scripted.script import load_script

    readme = (ROOT / "README.md").read_text()
    section = readme.split("### An LLM agent without a model", 1)[1].split("\n## ", 1)[0]
    script, sweep = re.findall(r"```toml\n(.*?)```", section, re.S)[:2]
    (tmp_path / "script.toml").write_text(script)
    (tmp_path / "sweep.toml").write_text(sweep)
    loaded = load_script(tmp_path / "script.toml")
    assert loaded.model == "claude-sonnet-4-5" and [t.kind for t in loaded.turns()] == ["tool", "tool", "message"]
    config = load_config(tmp_path / "sweep.toml", {})
    spec = config.agent_spec("claude")
    assert config.agents == ["claude"] and (spec.kind, spec.base_url, spec.key_env) == ("claude_code", "http://127.0.0.1:8767", None)
