"""Probe records as the graders may assume them: each known field of its type, or absent.

A probe writes its record inside the sandbox with an interpreter the agent controls (even
/usr/bin/python3 can be replaced by root in the container), so any JSON object can come back,
and a crafted one must not crash the harness or corrupt a typed column. The graders already read every field as optional; `conform` makes that
assumption true for types too: a field whose value is not of its declared type is dropped, so it
grades as missing, typically a failure, and never crashes a grader or reaches a typed Parquet
column. A grader that still fails on a conformed record gives `malformed` instead: the stage
is the agent's failure `probe_record_invalid`.
"""

from __future__ import annotations

from typing import Any, Mapping

#: The category of a stage whose probe record no grader could read (reb_ray.grading.categories).
PROBE_RECORD_INVALID = "probe_record_invalid"

Shape = type | tuple[type, ...] | dict | list


def _fits(value: Any, shape: Shape) -> Any:
    """`value` conformed to `shape`, or _DROP. Shapes: a type or tuple of types (bool is never
    an int or float), [shape] (a list, each element conformed, misfits left out), or a dict of
    field -> shape (a JSON object, conformed by `conform`). null (None) fits every shape: the
    graders read it as unknown, as they do a missing field. An int outside int64 fits no shape."""
    if value is None:
        return None
    if isinstance(shape, dict):
        return conform(value, shape) if isinstance(value, dict) else _DROP
    if isinstance(shape, list):
        if not isinstance(value, list):
            return _DROP
        kept = (_fits(v, shape[0]) for v in value)
        return [v for v in kept if v is not _DROP]
    types = shape if isinstance(shape, tuple) else (shape,)
    if isinstance(value, bool) and bool not in types:
        return _DROP
    if isinstance(value, int) and not isinstance(value, bool) and not _INT64_MIN <= value <= _INT64_MAX:
        return _DROP  # no column holds it (Parquet's int64): a planted 2**63 must not fail the row's write
    return value if isinstance(value, types) else _DROP


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


_DROP = object()


def conform(raw: Mapping[str, Any], shape: Mapping[str, Shape]) -> dict:
    """A copy of the record `raw` in which every field named in `shape` fits its shape or is
    absent; fields not named are kept as they are (graders never read them). Pure."""
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if key in shape:
            value = _fits(value, shape[key])
            if value is _DROP:
                continue
        out[key] = value
    return out


def malformed_reason(probe: str, exc: BaseException) -> str:
    """The one-line reason of a stage whose record a grader could not read."""
    return f"the {probe} probe's record (written in the agent's environment) is malformed: {type(exc).__name__}: {exc}"[:300]
