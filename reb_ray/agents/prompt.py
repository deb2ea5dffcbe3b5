"""The prompt every LLM agent gets: reb-ray's own system + task text (prompt_template.md).

It keeps the paper's semantics (the report contract of
`shared/data/researchenvbench/report_schema.json` at `/opt/scimlopsbench/report.json`, no
changes to tracked files, one final interpreter, no background jobs, the checks C0..C5 named)
but never shows a probe command or a task's hidden stage commands: only the repository root,
the report path and the task's optional `prompt_appendix` vary. Its sha256 goes into every
trials row (`prompt_sha256`), so rows that saw different prompts are never pooled silently.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from string import Template

from reb_ray.models.task import TaskSpec

TEMPLATE = Path(__file__).with_name("prompt_template.md")
SYSTEM_MARK, TASK_MARK = "<!-- system -->\n", "<!-- task -->\n"
#: Where the repository is inside a Docker sandbox (trial.py places it at <workdir>/repo).
REPO_ROOT = "/work/repo"

# The report contract's required keys (report_schema.json), each with what it must hold.
REPORT_FIELDS = (
    ("python_path", "string", "absolute path of the interpreter you built (must exist and run)"),
    ("python_version", "string or null", "the version that interpreter reports, e.g. 3.11.8"),
    ("torch_version", "string or null", "torch.__version__ as installed, or null if torch is not installed"),
    ("cuda_available", "boolean or null", "torch.cuda.is_available() as you observed it"),
    ("gpu_count", "integer or null", "number of GPUs you saw from that interpreter"),
    ("ddp_expected_ok", "boolean or null", "whether you expect multi-GPU (DDP) runs to work; null if unsure"),
    ("env_tool", "string", "one of conda, uv, pip, poetry, venv, none"),
    ("env_name", "string or null", "the environment's name or directory"),
    ("notes", "string or null", "key steps, decisions, and what you could not verify"),
)
REPORT_EXAMPLE = {
    "python_path": "/opt/envs/repo/bin/python", "python_version": "3.11.2", "torch_version": None,
    "cuda_available": None, "gpu_count": None, "ddp_expected_ok": None, "env_tool": "venv",
    "env_name": "repo", "notes": "what was installed and how; what was not verified",
}


@dataclass(frozen=True)
class Prompt:
    """A rendered prompt: `system` and `task` parts, `text` (both, as given to CLIs that take one
    prompt), and `sha256` (hex) of `text`."""

    system: str
    task: str

    @property
    def text(self) -> str:
        return f"{self.system.rstrip()}\n\n{self.task.rstrip()}\n"

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


@functools.lru_cache(maxsize=1)
def _template() -> str:
    return TEMPLATE.read_text()


def render_prompt(task: TaskSpec, report_path: str, repo_root: str = REPO_ROOT) -> Prompt:
    """The prompt for `task` with the sandbox's `repo_root` and `report_path` filled in."""
    raw = _template()
    system, _, task_text = raw.partition(TASK_MARK)
    fields = "\n".join(f"- `{name}` ({kind}): {what}" for name, kind, what in REPORT_FIELDS)
    appendix = f"\n## Notes for this repository\n\n{task.prompt_appendix.strip()}\n" if task.prompt_appendix else ""
    values = {"repo_root": repo_root, "report_path": report_path, "report_fields": fields,
              "report_example": json.dumps(REPORT_EXAMPLE, indent=2), "appendix": appendix}
    return Prompt(system.replace(SYSTEM_MARK, "").strip() + "\n", Template(task_text).substitute(values))
