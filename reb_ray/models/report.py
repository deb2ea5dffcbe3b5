"""The agent's self-report (report.json), as in the paper's contract, and what of it is required.

The contract (shared/data/researchenvbench/report_schema.json) asks for nine keys: python_path
(a non-empty string), python_version, torch_version, env_name and notes (string or null),
cuda_available and ddp_expected_ok (boolean or null), gpu_count (integer >= 0 or null) and
env_tool (a string); extra keys are allowed. Null means "not verified", never "false".

What the harness requires is only what probing needs, as the release applies it (its 44
`validate_agent_report.py` copies run every stage for any report that is a JSON object):

- `invalid_report` (nothing is probed; the applicable stages are the agent's failures): the
  file is not JSON, not a JSON object, over MAX_REPORT_BYTES, or its `python_path` is not
  usable: missing, not a string, empty, not absolute, longer than MAX_PATH_CHARS or holding a
  control character (the probes run it by that path, in several working directories). Whether
  it exists and runs is the probes' to find (interpreter_missing / interpreter_broken).
- Every other slip is a fault of the report, never a reason to skip a stage: a key missing,
  or a value of the wrong JSON type (`notes` a list, `python_version` a number, `env_tool`
  null, `gpu_count` -1). `contract_faults` lists them; C5 counts them (c5_report_faults) and
  audits no claim of the wrong type. A string is never read as the number or boolean it
  spells: `"4"` in gpu_count and `"true"` in cuda_available are wrong types, not 4 and true.

`parse_report` keeps the object exactly as written (`Report.written`): C5 audits what the agent
wrote, with its JSON types.
"""

from __future__ import annotations

import json
import math
import posixpath
from dataclasses import dataclass, field
from typing import Any

MAX_REPORT_BYTES = 1 << 20  # a real report is < 2 KiB; anything past 1 MiB is the agent misbehaving
MAX_PATH_CHARS = 4096  # PATH_MAX on Linux
REASON_CHARS = 300  # bound of the one-line reason stored in the stage row

#: The contract's informational keys: key -> (the JSON type it holds, null allowed). A bool is
#: not an int here, as in JSON Schema ("integer" excludes true/false).
INFORMATIONAL = {
    "python_version": (str, True),
    "torch_version": (str, True),
    "cuda_available": (bool, True),
    "gpu_count": (int, True),
    "ddp_expected_ok": (bool, True),
    "env_tool": (str, False),
    "env_name": (str, True),
    "notes": (str, True),
}
#: Every key the contract requires, in its order.
REPORT_KEYS = ("python_path", *INFORMATIONAL)
_TYPE_NAMES = {str: "a string", bool: "a boolean", int: "an integer"}


@dataclass(frozen=True)
class Report:
    """A report the probes can use: `python_path` (absolute, one line) and the JSON object as
    the agent wrote it (`written`, every key and type kept; what C5 audits)."""

    python_path: str
    written: dict[str, Any] = field(default_factory=dict)

    def faults(self) -> list[dict]:
        """`contract_faults` of the written object."""
        return contract_faults(self.written)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number" if math.isfinite(value) else f"number ({value})"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def field_fault(key: str, report: dict) -> str | None:
    """Why `report[key]` (an informational key) breaks the contract, in a few words, or None.

    "missing", or "<expected>, got <JSON type>" for a wrong type; gpu_count also below 0.
    """
    if key not in report:
        return "missing"
    kind, nullable = INFORMATIONAL[key]
    value = report[key]
    expected = _TYPE_NAMES[kind] + (" or null" if nullable else "")
    if value is None:
        return None if nullable else f"{expected} expected, got null"
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        return f"{expected} expected, got {_json_type(value)}"
    if key == "gpu_count" and value < 0:
        return f"an integer >= 0 or null expected, got {value}"
    return None


def contract_faults(report: dict) -> list[dict]:
    """The informational keys of `report` (the object as written) that break the contract:
    [{key, fault}] in the contract's order, fault being `field_fault`'s words. `python_path` is
    not among them: an unusable one makes the report invalid (`python_path_problem`)."""
    return [{"key": key, "fault": why} for key in INFORMATIONAL if (why := field_fault(key, report)) is not None]


def python_path_problem(report: dict) -> str | None:
    """Why the report's `python_path` cannot be probed (one line), or None when it can: it
    must be a non-empty absolute path of at most MAX_PATH_CHARS characters, no control
    character (NUL, newline, escape: the probes pass it in argv and logs)."""
    if "python_path" not in report:
        return "python_path: missing"
    value = report["python_path"]
    if not isinstance(value, str):
        return f"python_path: a string expected, got {_json_type(value)}"
    if not value.strip():
        return "python_path: empty"
    if len(value) > MAX_PATH_CHARS:
        return f"python_path: longer than {MAX_PATH_CHARS} characters"
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        return "python_path: contains a control character (NUL, newline, escape)"
    if not posixpath.isabs(value):
        return f"python_path: {value!r} is not an absolute path"
    return None


def _one_line(text: str) -> str:
    """`text` with control characters escaped, cut to REASON_CHARS characters."""
    flat = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)
    return flat if len(flat) <= REASON_CHARS else flat[: REASON_CHARS - 3] + "..."


def load_report_object(data: bytes | str | None) -> tuple[dict | None, str | None]:
    """(the report's JSON object, None) or (None, one-line reason): None data, over
    MAX_REPORT_BYTES, not JSON (deep nesting, ints past the digit limit included) or not an
    object. Never raises."""
    if data is None:
        return None, "report file not written"
    raw = data.encode("utf-8", errors="replace") if isinstance(data, str) else data
    if len(raw) > MAX_REPORT_BYTES:
        return None, f"too large: {len(raw)} bytes > {MAX_REPORT_BYTES}"
    try:
        parsed = json.loads(raw.decode("utf-8", errors="replace"))
    except json.JSONDecodeError as exc:
        return None, _one_line(f"not JSON: {exc}")
    except (RecursionError, ValueError) as exc:  # deep nesting; ints past the digit limit
        return None, _one_line(f"not JSON: {type(exc).__name__}: {exc}")
    if not isinstance(parsed, dict):
        return None, f"report: a JSON object expected, got {type(parsed).__name__}"
    return parsed, None


def parse_report(data: bytes | None) -> tuple[str, Report | None, str | None]:
    """(report_status, report or None, one-line reason or None) for the raw report bytes.

    report_status is "ok", "missing_report" (`data` is None) or "invalid_report" (not a JSON
    object, or no usable python_path: module docstring). Informational keys never make a
    report invalid. Never raises, whatever the agent wrote: the reason is one printable line of
    at most REASON_CHARS characters.
    """
    if data is None:
        return "missing_report", None, "report file not written"
    obj, why = load_report_object(data)
    if obj is None:
        return "invalid_report", None, why
    problem = python_path_problem(obj)
    if problem is not None:
        return "invalid_report", None, _one_line(problem)
    return "ok", Report(obj["python_path"], obj), None
