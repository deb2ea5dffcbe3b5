"""The agent's self-report (report.json), as in the paper's contract.

Required keys (shared/data/researchenvbench/report_schema.json): python_path (non-empty
string), python_version, torch_version, cuda_available, gpu_count, ddp_expected_ok, env_tool,
env_name, notes; all but python_path and env_tool may be null. Extra keys are allowed.
"""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

MAX_REPORT_BYTES = 1 << 20  # a real report is < 2 KiB; anything past 1 MiB is the agent misbehaving
MAX_PATH_CHARS = 4096  # PATH_MAX on Linux
REASON_CHARS = 300  # bound of the one-line reason stored in the stage row


class Report(BaseModel):
    """A parsed report. Null means "not verified", never "false"."""

    model_config = ConfigDict(extra="allow")

    python_path: str = Field(min_length=1)
    python_version: str | None
    torch_version: str | None
    cuda_available: bool | None
    gpu_count: int | None = Field(ge=0)
    ddp_expected_ok: bool | None
    env_tool: str
    env_name: str | None
    notes: str | None

    @field_validator("python_path")
    @classmethod
    def _path_is_one_absolute_line(cls, value: str) -> str:
        # The probes pass python_path to commands in the sandbox: a NUL, a line break or any
        # control character cannot be part of a real interpreter path and breaks argv/logs.
        if len(value) > MAX_PATH_CHARS:
            raise ValueError(f"longer than {MAX_PATH_CHARS} characters")
        if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
            raise ValueError("contains a control character (NUL, newline, escape)")
        return value


def _one_line(text: str) -> str:
    """`text` with control characters escaped, cut to REASON_CHARS characters."""
    flat = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)
    return flat if len(flat) <= REASON_CHARS else flat[: REASON_CHARS - 3] + "..."


def parse_report(data: bytes | None) -> tuple[str, Report | None, str | None]:
    """(report_status, report or None, one-line reason or None) for the raw report bytes.

    report_status is "ok", "missing_report" (`data` is None) or "invalid_report". Never raises,
    whatever the agent wrote: the reason is one printable line of at most REASON_CHARS
    characters. Reports over MAX_REPORT_BYTES, nested too deep for the JSON parser, or not a
    JSON object are invalid.
    """
    if data is None:
        return "missing_report", None, "report file not written"
    if len(data) > MAX_REPORT_BYTES:
        return "invalid_report", None, f"too large: {len(data)} bytes > {MAX_REPORT_BYTES}"
    try:
        parsed = json.loads(data.decode("utf-8", errors="replace"))
    except json.JSONDecodeError as exc:
        return "invalid_report", None, _one_line(f"not JSON: {exc}")
    except (RecursionError, ValueError) as exc:  # deep nesting; ints past the digit limit
        return "invalid_report", None, _one_line(f"not JSON: {type(exc).__name__}: {exc}")
    if not isinstance(parsed, dict):
        return "invalid_report", None, f"report: a JSON object expected, got {type(parsed).__name__}"
    try:
        return "ok", Report.model_validate(parsed), None
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(part) for part in err["loc"]) or "report"
        return "invalid_report", None, _one_line(f"{where}: {err['msg']}")
    except RecursionError as exc:  # deep nesting in an extra key
        return "invalid_report", None, _one_line(f"report: {exc}")
