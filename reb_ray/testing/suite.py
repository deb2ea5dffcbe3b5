"""The one writer of small task suites for the tests and benchmarks: a task directory with its
`task.toml` and its repository, as a suite on disk holds them (the schema: reb_ray.models.task).

`write_task(root, suite, task_id, ...)` writes `root/suite/task_id/task.toml` and, for bundled
source, the repository's files under `repo/`. Each stage argument is the body of its
`[stages.NAME]` table (TOML lines, e.g. `'command = "true"'`), or None to leave the table out (the
task spec's default then applies); `OFF` (or `off(reason)`) opts a stage out. Used where a test
needs tasks of a shape the bundled suites lack (GPU counts, hanging stages, assets, git sources,
many tasks)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def off(reason: str) -> str:
    """A stage's table body that opts it out of the task, saying why."""
    return f'applicable = false\nskip_reason = "{reason}"'


#: A stage's table body that opts it out of the task.
OFF = off("not in this task")
#: A two-rank multi-GPU stage that always passes.
MULTI = 'command = "true"\nlauncher = "python"\nranks = 2'
HELLO = {"main.py": "print('hello')\n"}


def write_task(root: Path, suite: str, task_id: str, *, category: str = "1_cpu_only",
               cpu: str | None = 'command = "true"', single_gpu: str | None = None, multi_gpu: str | None = None,
               cuda: str | None = None, header: str = "", files: dict[str, str] | None = None,
               git: tuple[str, str] | None = None, assets: Sequence[str] = ()) -> Path:
    """Write one task and return its directory.

    Its source is a bundled repository holding `files` (path: text; default a main.py that prints
    hello; {} for an empty one), or with `git = (URL, commit)` that repository at that commit, and
    then nothing but task.toml is written (`files` must be None). `header`: more top-level TOML
    lines (c0_baseline_total, prompt_appendix, ...). `assets`: one inline table body per asset
    (e.g. `'name = "w", kind = "model", path = "w.bin"'`), written as the `assets` array."""
    task_dir = root / suite / task_id
    task_dir.mkdir(parents=True, exist_ok=True)
    if git is None:
        for name, text in (HELLO if files is None else files).items():
            path = task_dir / "repo" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        (task_dir / "repo").mkdir(exist_ok=True)
        source = 'source = { bundled = "repo" }'
    else:
        assert files is None, "a task with git source has no bundled files"
        source = f'source = {{ git = "{git[0]}", commit = "{git[1]}" }}'
    lines = [f'id = "{task_id}"', f'suite = "{suite}"', f'category = "{category}"', source]
    if header:
        lines.append(header)
    if assets:
        lines += ["assets = [", *(f"  {{ {asset} }}," for asset in assets), "]"]
    for name, body in (("cpu", cpu), ("single_gpu", single_gpu), ("multi_gpu", multi_gpu), ("cuda", cuda)):
        if body is not None:
            lines += ["", f"[stages.{name}]", body]
    (task_dir / "task.toml").write_text("\n".join(lines) + "\n")
    return task_dir
