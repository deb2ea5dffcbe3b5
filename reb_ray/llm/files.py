"""Reading the llm package's user files (scripts, price tables): TOML or JSON, one-line errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from reb_ray.errors import RebRayError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

M = TypeVar("M", bound=BaseModel)


class LLMFileError(RebRayError):
    """A script or price file that cannot be read or does not fit its schema (one line)."""


def read_data(path: Path) -> dict:
    """The file's top-level table: `.json` is read as JSON, anything else as TOML.

    Raises LLMFileError naming the file when it cannot be read or parsed.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise LLMFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        data = json.loads(text) if path.suffix.lower() == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        kind = "JSON" if path.suffix.lower() == ".json" else "TOML"
        raise LLMFileError(f"{path}: {kind} syntax error: {exc}".replace("\n", " ")) from None
    if not isinstance(data, dict):
        raise LLMFileError(f"{path}: the top level must be a table/object, not {type(data).__name__}")
    return data


def validate(model: type[M], data: dict, path: Path | str, tags: frozenset[str] = frozenset()) -> M:
    """`model` validated from `data`; LLMFileError `FILE: field.path = value: message` otherwise.

    `tags` are the values of a discriminated union's tag (e.g. a turn's `kind`), which pydantic
    puts into an error's location after a list index; they are left out of the field path.
    """
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        err = errors[0]
        loc = [p for i, p in enumerate(err["loc"])
               if not (p in tags and i > 0 and isinstance(err["loc"][i - 1], int))]
        field = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".") or "(top level)"
        value = "" if err["type"] == "missing" else f" = {err.get('input')!r}"[:120]
        more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
        raise LLMFileError(f"{path}: {field}{value}: {err['msg']}{more}".replace("\n", " ")) from None
