"""Loading task files and suites (`tasks/<suite>/<task-id>/task.toml`) with one-line errors.

`load_task` validates one file against reb_ray.models.task's TaskSpec; `load_suite` loads a
suite's tasks, `list_suites` names the suites, `select_tasks` filters by id patterns. Every
failure is one TaskSpecError line naming the file, the field path and the bad value:

    tasks/demo/numpy-trainer/task.toml: stages.cpu.timeout_s = -5: Input should be greater than 0
"""

from __future__ import annotations

import fnmatch
import json
try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from reb_ray.models.task import TASK_FILE, TaskSpec, TaskSpecError

__all__ = ["list_suites", "load_suite", "load_task", "select_tasks"]



def _display(path: Path) -> str:
    """A path as the user should see it: relative to the working directory when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _show_value(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model class whose fields live at `loc` inside a TaskSpec (for listing valid keys)."""
    model: Any = TaskSpec
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(model, type) and issubclass(model, BaseModel)) or part not in model.model_fields:
            return None
        model = model.model_fields[part].annotation
        for arg in typing.get_args(model) or ():  # list[Asset], Optional[...]
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                model = arg
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _one_line(file: Path, exc: ValidationError) -> str:
    errors = exc.errors(include_url=False)
    err = errors[0]
    loc = tuple(err["loc"])
    if err["type"] == "stage_not_applicable":  # raised for the list: point at the asset's own field
        loc, err = (*loc, err["ctx"]["i"], "stages"), {**err, "input": err["ctx"]["stages"]}
    field = ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in loc).replace(".[", "[") or "(top level)"
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        parent = _model_at(loc[:-1])
        if parent is not None:
            valid = [name for name in parent.model_fields if name != "task_dir"]
            msg = f"unknown key; valid keys: {', '.join(valid)}"
    value = "" if err["type"] == "missing" else f" = {_show_value(err.get('input'))}"
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{_display(file)}: {field}{value}: {msg}{more}".replace("\n", " ")


def load_task(path: Path) -> TaskSpec:
    """Load and validate one task file (`path` = .../<suite>/<task-id>/task.toml).

    Returns a TaskSpec whose `task_dir` is the file's (absolute) directory. Raises
    TaskSpecError (one line naming the file, field path and bad value) when the file is
    missing, is not valid TOML, or does not satisfy the schema.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TaskSpecError(f"{_display(path)}: cannot read: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TaskSpecError(f"{_display(path)}: TOML syntax error: {exc}".replace("\n", " ")) from None
    for key in ("task_dir", "harbor"):
        if key in data:
            value = _show_value(data[key])
            raise TaskSpecError(f"{_display(path)}: {key} = {value}: unknown key; the loader sets {key}")
    try:
        return TaskSpec.model_validate(data, context={"task_dir": path.resolve().parent})
    except ValidationError as exc:
        raise TaskSpecError(_one_line(path, exc)) from None


def _root(root: Path | None) -> Path:
    if root is None:
        from reb_ray.paths import bundled_dir

        return bundled_dir("tasks")
    if not Path(root).is_dir():
        raise TaskSpecError(f"tasks directory {_display(Path(root))} does not exist")
    return Path(root)


def _visible_dirs(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))


def list_suites(root: Path | None = None) -> list[str]:
    """Names of the suites under `root` (default: the bundled tasks directory), sorted.

    Raises TaskSpecError when an explicit `root` is not a directory.
    """
    return [p.name for p in _visible_dirs(_root(root))]


def load_suite(suite: str, root: Path | None = None) -> list[TaskSpec]:
    """Load every task of `suite` under `root` (default: bundled tasks), sorted by id.

    Raises TaskSpecError for an unknown suite (listing the valid ones), for a task directory
    without a task.toml, and for the first invalid task file.
    """
    base = _root(root)
    suite_dir = base / suite
    if not suite or not suite_dir.is_dir() or suite.startswith((".", "_")) or "/" in suite:
        valid = ", ".join(list_suites(base)) or "(none)"
        raise TaskSpecError(f"unknown suite {suite!r} in {_display(base)}; valid: {valid}")
    tasks = []
    for task_dir in _visible_dirs(suite_dir):
        task_file = task_dir / TASK_FILE
        if not task_file.is_file():
            raise TaskSpecError(f"{_display(task_dir)}: task directory has no {TASK_FILE}")
        tasks.append(load_task(task_file))
    return sorted(tasks, key=lambda t: t.id)


def find_task(suite: str, task_id: str, root: Path | None = None, needed_for: str = "use it") -> TaskSpec:
    """The task `task_id` of `suite` under `root`, as a stored row names them. Raises
    TaskSpecError with one line when the suite no longer has it (saying what it was
    `needed_for`), for an unknown suite or an invalid task file (load_suite)."""
    task = next((t for t in load_suite(suite, root) if t.id == task_id), None)
    if task is None:
        raise TaskSpecError(f"suite {suite!r} has no task {task_id!r} any more: cannot {needed_for}")
    return task


def select_tasks(tasks: list[TaskSpec], pattern: str | None) -> list[TaskSpec]:
    """Tasks whose id matches any of the comma-separated fnmatch patterns, in input order.

    None or an empty pattern selects everything. Raises TaskSpecError when a pattern matches
    no task, so a typo never silently selects nothing.
    """
    patterns = [p.strip() for p in (pattern or "").split(",") if p.strip()]
    if not patterns:
        return list(tasks)
    for pat in patterns:
        if not any(fnmatch.fnmatchcase(t.id, pat) for t in tasks):
            ids = ", ".join(t.id for t in tasks[:10]) + (", ..." if len(tasks) > 10 else "")
            raise TaskSpecError(f"task pattern {pat!r} matches no task; ids: {ids or '(none)'}")
    return [t for t in tasks if any(fnmatch.fnmatchcase(t.id, pat) for pat in patterns)]
