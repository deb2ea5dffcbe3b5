"""The README is a front page: the quick start is exactly two commands, CI runs the second one,
and the page stays short, pointing to the user guide for the rest (whose examples are checked
here and in the tests beside the code they show)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The most lines the README may have: a front page, not the manual (docs/guide/ is that).
README_MAX_LINES = 150


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


def test_the_readme_is_a_front_page_that_links_every_guide_page():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= README_MAX_LINES
    pages = sorted(p.name for p in (ROOT / "docs/guide").glob("*.md"))
    assert len(pages) >= 9 and "README.md" in pages
    linked = set(re.findall(r"\]\(docs/guide/([\w-]+\.md)\)", readme))
    assert linked == set(pages), f"guide pages the README does not link: {sorted(set(pages) - linked)}"
    # The test suite's tiers and cost moved to the guide; the README keeps one line pointing there.
    assert "docs/guide/tests.md" in readme and "measured cost" in readme


def test_the_scripted_endpoint_examples_load(tmp_path):
    """The guide's script and sweep.toml for an LLM agent without a model are valid as written."""
    from reb_ray.cli.sweep import load_config
    from reb_ray.llm.scripted.script import load_script

    guide = (ROOT / "docs/guide/agents.md").read_text()
    section = guide.split("### An LLM agent without a model", 1)[1].split("\n## ", 1)[0]
    script, sweep = re.findall(r"```toml\n(.*?)```", section, re.S)[:2]
    (tmp_path / "script.toml").write_text(script)
    (tmp_path / "sweep.toml").write_text(sweep)
    loaded = load_script(tmp_path / "script.toml")
    assert loaded.model == "claude-sonnet-4-5" and [t.kind for t in loaded.turns()] == ["tool", "tool", "message"]
    config = load_config(tmp_path / "sweep.toml", {})
    spec = config.agent_spec("claude")
    assert config.agents == ["claude"] and (spec.kind, spec.base_url, spec.key_env) == ("claude_code", "http://127.0.0.1:8767", None)


def test_the_command_agent_example_loads(tmp_path):
    """The guide's `[agents.my-cli]` command agent is a valid agent table as written."""
    from reb_ray.cli.sweep import load_config

    guide = (ROOT / "docs/guide/agents.md").read_text()
    table = next(b for b in re.findall(r"```toml\n(.*?)```", guide, re.S) if "[agents.my-cli]" in b)
    (tmp_path / "sweep.toml").write_text(table)
    spec = load_config(tmp_path / "sweep.toml", {}).agent_spec("my-cli")
    assert (spec.kind, spec.report_mode, spec.key_env) == ("command", "output", "MY_AGENT_KEY")
    assert spec.env == {"OPENAI_BASE_URL": "{llm_base_url}"}
