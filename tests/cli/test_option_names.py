"""One name per concept: every command of the real `reb-ray` app (typer -> click commands) is
walked, and an option that means one of the concepts below must be spelled as that concept's
one name, and no visible option may carry a second name for it. An old spelling stays accepted
as a hidden option (reb_ray.cli.aliases), never shown in --help."""

from __future__ import annotations

import re

import pytest
import typer

from reb_ray.cli import app
from tests.cli.in_process import run_cli

#: concept -> (its one option name, how a parameter shows it means the concept: its dest names,
#: and a pattern on its help text).
CONCEPTS: dict[str, tuple[str, set[str], str]] = {
    "tasks directory": ("--tasks-root", {"tasks_root", "root"},
                        r"(director(y|ies) (holding|of) (the run's )?suites|tasks directory holding)"),
    "sweep": ("--sweep-id", {"sweep_id", "sweep"}, r"^(only this sweep|the sweep, when|sweep id)"),
    "repository mirror": ("--repo-mirror", {"repo_mirror", "repo_mirrors", "mirror_dir"},
                          r"(mirror root|mirror director|director(y|ies) of bare mirrors)"),
    "asset cache": ("--assets", {"assets", "assets_dir"}, r"asset cache"),
    "toolchains directory": ("--toolchains-dir", {"toolchains_dir"}, r"toolchains directory"),
    "sandbox image profile": ("--profile", {"profile", "image_profile"}, r"image profile|^paper \(cuda"),
    "kept environments' disk budget": ("--env-disk-budget-gb", {"env_disk_budget_gb", "budget_gb"},
                                       r"budget (in gib )?for (the )?kept|disk budget for kept"),
    "ray cluster": ("--address", {"address"}, r"ray cluster"),
    "sandbox engine": ("--sandbox", {"sandbox"}, r"^docker \| podman"),
    "wheel directory": ("--wheelhouse", {"wheelhouse", "wheelhouses"}, r"wheel directory"),
    "task patterns": ("--tasks", {"tasks"}, r"^pattern\(s\) on task ids"),
    "concurrency": ("--max-concurrent", {"max_concurrent"}, r"trials running at once"),
    "json output": ("--json", {"as_json"}, r"(one json object|json lines)"),
}


def _commands(command, path=()):
    if hasattr(command, "commands"):  # a group (typer vendors its own click: duck-typed)
        for name, sub in command.commands.items():
            yield from _commands(sub, (*path, name))
    else:
        yield " ".join(path), command


def _options():
    """(command path, dest, visible long flags, help) of every visible option of every command."""
    for path, command in _commands(typer.main.get_command(app)):
        for param in command.params:
            if type(param).__name__.endswith("Option") and not getattr(param, "hidden", False):
                flags = [f for f in (*param.opts, *param.secondary_opts) if f.startswith("--") and not f.startswith("--no-")]
                yield path, param.name, flags, " ".join((param.help or "").split())


def test_the_walk_sees_every_command():
    paths = {path for path, *_ in _options()}
    assert {"sweep", "regrade", "tasks verify", "tasks list", "env export", "env gc", "agents install", "mirror",
            "assets fetch", "trial show"} <= paths, paths


def test_each_concept_has_one_name_across_every_command():
    wrong = []
    for path, dest, flags, text in _options():
        for concept, (name, dests, pattern) in CONCEPTS.items():
            if dest in dests or re.search(pattern, text, re.I):
                if flags != [name]:
                    wrong.append(f"{path}: {'/'.join(flags)} means {concept!r}, whose one name is {name}")
    assert not wrong, "\n".join(wrong)


def test_one_name_is_never_two_concepts():
    """The same visible flag with different dests would be one name for two things."""
    seen: dict[str, set[str]] = {}
    for _path, dest, flags, _text in _options():
        for flag in flags:
            seen.setdefault(flag, set()).add(dest)
    doubled = {flag: dests for flag, dests in seen.items() if len(dests) > 1}
    assert doubled == {}, doubled


@pytest.mark.parametrize(("old", "new"), [
    (["tasks", "list", "--root"], ["tasks", "list", "--tasks-root"]),
    (["agents", "list", "--dir"], ["agents", "list", "--toolchains-dir"]),
])
def test_an_old_spelling_still_works_hidden_and_both_at_once_is_one_line(old, new, tmp_path):
    import shutil

    from reb_ray.paths import bundled_dir

    root = tmp_path / "tasks"
    shutil.copytree(bundled_dir("tasks") / "demo" / "numpy-trainer", root / "demo" / "numpy-trainer")
    value = str(root) if "tasks" in old else str(tmp_path / "toolchains")
    before, after = run_cli(*old, value), run_cli(*new, value)
    assert before.returncode == after.returncode == 0 and before.stdout == after.stdout, before.stderr + after.stderr
    assert old[-1] not in run_cli(*old[:-1], "--help").stdout
    both = run_cli(*new, value, old[-1], value)
    assert both.returncode == 2 and both.stderr.count("\n") == 1 and "old spelling" in both.stderr, both.stderr


def test_tasks_verify_takes_tasks_root():
    res = run_cli("tasks", "verify", "--tasks-root", "/nonexistent-root", "--suite", "demo")
    assert "No such option" not in res.stderr and res.returncode == 2, res.stderr
