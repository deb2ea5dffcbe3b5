"""The one writer of small task suites for the tests and benchmarks: a task directory with its
`task.toml` and a bundled repository, as a suite on disk holds them (docs/task-spec.md).

`write_task(root, suite, task_id, ...)` writes `root/suite/task_id/task.toml` and the
repository's files under `repo/`. Each stage argument is the body of its `[stages.NAME]` table
(TOML lines, e.g. `'command = "true"'`), or None to leave the table out (the task spec's
default then applies); `OFF` opts a stage out. Used where a test needs tasks of a shape the
bundled suites lack (GPU counts, hanging stages, many tasks)."""

from __future__ import annotations

from pathlib import Path

#: A stage's table body that opts it out of the task.
OFF = 'applicable = false\nskip_reason = "not in this task"'
#: A two-rank multi-GPU stage that always passes.
MULTI = 'command = "true"\nlauncher = "python"\nranks = 2'
HELLO = {"main.py": "print('hello')\n"}


def write_task(root: Path, suite: str, task_id: str, *, category: str = "1_cpu_only",
               cpu: str | None = 'command = "true"', single_gpu: str | None = None, multi_gpu: str | None = None,
               cuda: str | None = None, header: str = "", files: dict[str, str] | None = None) -> Path:
    """Write one task with a bundled repository holding `files` (path: text; default a main.py
    that prints hello) and return its directory. `header`: more top-level TOML lines."""
    task_dir = root / suite / task_id
    for name, text in (HELLO if files is None else files).items():
        path = task_dir / "repo" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (task_dir / "repo").mkdir(parents=True, exist_ok=True)
    lines = [f'id = "{task_id}"', f'suite = "{suite}"', f'category = "{category}"', 'source = { bundled = "repo" }']
    if header:
        lines.append(header)
    for name, body in (("cpu", cpu), ("single_gpu", single_gpu), ("multi_gpu", multi_gpu), ("cuda", cuda)):
        if body is not None:
            lines += ["", f"[stages.{name}]", body]
    (task_dir / "task.toml").write_text("\n".join(lines) + "\n")
    return task_dir
