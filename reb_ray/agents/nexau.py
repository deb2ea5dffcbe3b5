"""`nexau`: NexAU (nex-agi/NexAU) from the toolchain, headless, inside the sandbox.

NexAU is installed from a source checkout (`reb-ray agents install --nexau-src DIR`,
reb_ray.agents.toolchain_nexau); without it the kind fails at once with an
`infra_toolchain` error saying how to install it. The runner copies
`nexau_files/driver.py` and three tool definitions into its work directory and writes an
agent config (NexAU's YAML; JSON here):

- `llm_config`: `api_type: openai_chat_completion` (NexAU's OpenAI-compatible chat mode)
  against `ctx.llm.base_url + "/v1"` with the trial's stand-in key and the spec's model,
  non-streaming;
- `tools`: `run_shell_command` (bash, in the repository root unless told otherwise),
  `write_file`, `read_file`: NexAU's own builtin implementations, with our schema texts;
- `max_iterations` = the spec's max_turns (else MAX_ITERATIONS) + 1, since NexAU's last
  iteration makes no model call (N model calls: N + 1), `sandbox_config` local with
  the repository as work_dir (commands run in our sandbox, under its own PATH);
- the system prompt is our prompt's system part; the task part is the user message.

The driver does what `nexau chat CONFIG --query PROMPT` does (build the agent from the
YAML, run it once, print the response) and also records each model call (its TokenUsage),
tool call and the stop reason as JSON Lines through a NexAU middleware, flushed as they
happen: that file is the transcript, also after a timeout. From it come `reported_usage`
(NexAU's per-call counts converted to the proxy's convention; NexAU computes no cost, and
Chat Completions cannot express cache writes, so both are absent), `agent_version` (the
installed nexau's), `limit` (`max_turns=N` when NexAU stopped on max_iterations), and the
forced report (the last JSON object of its final response, when it wrote no file). Its
scratch directory `/tmp/nexau_bash_tool_results` is removed with the work directory.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path

from reb_ray.agents import runner_support as rs
from reb_ray.agents.base import Agent, AgentContext, AgentRun
from reb_ray.agents.toolchain import NEXAU_INSTALL_HINT, NEXAU_PART
from reb_ray.errors import InfraError
from reb_ray.jsonl import json_objects
from reb_ray.sandbox.base import SYSTEM_PATH
from reb_ray.sandbox import Sandbox

KIND = "nexau"
FILES = Path(__file__).with_name("nexau_files")
TOOLS = {"run_shell_command": "nexau.archs.tool.builtin.shell_tools:run_shell_command",
         "write_file": "nexau.archs.tool.builtin.file_tools:write_file",
         "read_file": "nexau.archs.tool.builtin.file_tools:read_file"}
MAX_ITERATIONS = 10_000  # no turn limit in the spec: the agent timeout bounds the run
SCRATCH = "/tmp/nexau_bash_tool_results"  # where NexAU's shell tool keeps each command's output


class NexauAgent(Agent):
    """Runs NexAU through nexau_files/driver.py; see the module docstring. Not trusted."""

    name = KIND
    uses_toolchain = True
    uses_llm = True
    requires_model = True

    def config(self, ctx: AgentContext, work: str) -> dict:
        """NexAU's agent config (YAML; written as JSON)."""
        assert ctx.prompt is not None and ctx.llm is not None
        return {
            "type": "agent", "name": "reb_ray_nexau", "system_prompt": rs.jinja_literal(ctx.prompt.system),
            "system_prompt_type": "string", "tool_call_mode": "structured",
            # NexAU's last iteration makes no model call (its executor force-stops before it).
            "max_iterations": (ctx.llm.max_turns or MAX_ITERATIONS) + 1, "max_context_tokens": 200_000,
            "llm_config": {"model": ctx.llm.model, "base_url": f"{ctx.llm.base_url}/v1", "api_key": ctx.llm.api_key,
                           "api_type": "openai_chat_completion", "stream": False},
            "tools": [{"name": name, "yaml_path": f"{work}/{name}.tool.yaml", "binding": binding}
                      for name, binding in TOOLS.items()],
            "sandbox_config": {"type": "local", "work_dir": ctx.repo_dir},
        }

    def run(self, sandbox: Sandbox, ctx: AgentContext) -> AgentRun:
        started = time.monotonic()
        llm = rs.require_llm(ctx, self.name, KIND, sandbox)
        assert ctx.prompt is not None and ctx.toolchain is not None, "run_trial sets the prompt and mounts the toolchain"
        python = f"{ctx.toolchain}/{NEXAU_PART}/venv/bin/python"
        installed = sandbox.exec(["test", "-f", f"{ctx.toolchain}/{NEXAU_PART}/MANIFEST.json", "-a", "-x", python], timeout=60)
        if installed.exit_code != 0:
            raise InfraError("infra_toolchain", f"nexau is not installed in the agent toolchain: run `{NEXAU_INSTALL_HINT}` on this node")
        work = rs.work_dir(ctx, KIND)
        with tempfile.TemporaryDirectory() as tmp:  # one copy into the sandbox, not six
            for file in FILES.iterdir():
                if file.suffix in (".py", ".yaml"):
                    shutil.copy(file, tmp)
            Path(tmp, "agent.yaml").write_text(json.dumps(self.config(ctx, work), indent=1))
            Path(tmp, "prompt.md").write_text(ctx.prompt.task)
            sandbox.put(tmp, work)
        events_file = f"{work}/events.jsonl"
        env = rs.cli_env(self, ctx, {"PATH": SYSTEM_PATH})
        argv = [python, f"{work}/driver.py", f"{work}/agent.yaml", f"{work}/prompt.md", events_file,
                *(self.spec.extra_args if self.spec else [])]
        result = sandbox.exec(argv, timeout=rs.time_left(ctx, started), env=env, workdir=work)
        run = AgentRun.from_exec(result, ctx.timeout_s, started)
        raw = rs.read_optional(sandbox, events_file) or b""
        events = parse_events(raw)
        run.transcript = raw or None
        run.agent_version = next((e.get("nexau_version") for e in events if e.get("type") == "start"), None)
        run.reported_usage = reported_usage(events)
        end = next((e for e in reversed(events) if e.get("type") == "end"), {})
        if not result.timed_out and end.get("stop_reason") == "MAX_ITERATIONS_REACHED":
            run.limit = f"max_turns={llm.max_turns}" if llm.max_turns else f"max_iterations={MAX_ITERATIONS}"
        if rs.force_report(sandbox, ctx.report_path, [end.get("response"), _last_text(events)]):
            run.report_source = "forced_from_output"
        rs.remove_dir(sandbox, work, SCRATCH)
        run.wall_time_s = time.monotonic() - started
        return run


def parse_events(raw: bytes) -> list[dict]:
    """The driver's JSON Lines (a torn last line, from a killed run, is skipped)."""
    return json_objects(raw)


def _count(value) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def reported_usage(events: list[dict]) -> dict | None:
    """NexAU's own token counts summed over its model calls, in the proxy's convention: its
    `input_tokens` is the uncached part (nexau/core/usage.py), so input = input + cache reads
    + cache writes; its `completion_tokens` from an OpenAI API already include reasoning.
    None when no model call was recorded."""
    usages = [e["usage"] for e in events if e.get("type") == "model_call" and isinstance(e.get("usage"), dict)]
    if not usages:
        return None
    return {
        "input_tokens": sum(_count(u.get("input_tokens")) + _count(u.get("cache_read_tokens"))
                            + _count(u.get("cache_creation_tokens")) for u in usages),
        "cached_input_tokens": sum(_count(u.get("cache_read_tokens")) for u in usages),
        "output_tokens": sum(_count(u.get("completion_tokens")) for u in usages),
        "reasoning_tokens": sum(_count(u.get("reasoning_tokens")) for u in usages),
    }


def _last_text(events: list[dict]) -> str | None:
    return next((e.get("text") for e in reversed(events) if e.get("type") == "model_call" and e.get("text")), None)
