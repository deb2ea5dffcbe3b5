"""The agent's self-report (report.json), as in the paper's contract.

Required keys (shared/data/researchenvbench/report_schema.json): python_path (non-empty
string), python_version, torch_version, cuda_available, gpu_count, ddp_expected_ok, env_tool,
env_name, notes; all but python_path and env_tool may be null. Extra keys are allowed.
"""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict, Field, ValidationError


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


def parse_report(data: bytes | None) -> tuple[str, Report | None, str | None]:
    """(report_status, report or None, one-line reason or None) for the raw report bytes.

    report_status is "ok", "missing_report" (`data` is None) or "invalid_report".
    """
    if data is None:
        return "missing_report", None, "report file not written"
    try:
        return "ok", Report.model_validate(json.loads(data.decode("utf-8", errors="replace"))), None
    except json.JSONDecodeError as exc:
        return "invalid_report", None, f"not JSON: {exc}"
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(part) for part in err["loc"]) or "report"
        return "invalid_report", None, f"{where}: {err['msg']}"
