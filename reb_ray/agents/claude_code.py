"""`claude_code`: Anthropic's Claude Code CLI (`@anthropic-ai/claude-code`, pinned in
`toolchain.PINS`), in print mode.

    claude -p PROMPT --output-format stream-json --verbose --dangerously-skip-permissions
           [--model M] [--max-turns N] [extra_args]

run in the repository root by the shared LLM CLI run (`LlmCliAgent`). Choices, and
why (each checked by running the pinned version):

- **Root, told it is sandboxed** (`IS_SANDBOX=1`). Claude refuses
  `--dangerously-skip-permissions` as root otherwise. Running it as a non-root user instead
  would change what is measured: building the environment needs root (apt-get, writing
  /opt, the system site), the probes run as root, and a user with sudo is root in all but
  name. Our container is the sandbox, as for codex.
- **Its state beside the repository, HOME untouched**: `CLAUDE_CONFIG_DIR` is a fresh state
  directory holding the pre-written onboarding file `.claude.json`
  (`hasCompletedOnboarding`, `bypassPermissionsModeAccepted`), so nothing is written into
  /root: the agent's commands keep the HOME (pip's user site and caches, shell rc files) the
  probes see. `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1` (no telemetry, error reports or
  update checks); `ANTHROPIC_BASE_URL = ctx.llm.base_url` (the metering proxy; claude adds
  `/v1/messages`) and `ANTHROPIC_API_KEY` = the trial's stand-in key.
- The stream-json events on stdout are the transcript. Usage is the final `result` event's
  `usage`, converted to the contract's convention (input_tokens = input_tokens +
  cache_read_input_tokens + cache_creation_input_tokens); the Messages API reports no
  reasoning count, so none is given. `total_cost_usd` is kept as the CLI's `cost_usd`: for a
  model it does not know it is claude's own guess (`costBasis: unknown`), so it only ever
  counts as `agent_reported`. A `result` of subtype `error_max_turns` sets
  `limit = max_turns=N`.
- The report: the agent's file; when there is none, the `result` event's `structured_output`,
  else the last JSON object in its result text (or in its last assistant text when no result
  came): `report_source = forced_from_output`. `--json-schema` (which gives
  `structured_output`) is opt-in through extra_args, not the default: with it claude offers a
  StructuredOutput tool and keeps asking the model until it calls it, so a session that ends
  in a plain message never ends; the paper's contract is the report file.
"""

from __future__ import annotations

import json

from reb_ray.agents.base import AgentContext, LlmAccess
from reb_ray.agents.command import last_json_object
from reb_ray.agents.llm_cli import CliSession, LlmCliAgent, as_count, usage_dict

ONBOARDING = {"hasCompletedOnboarding": True, "bypassPermissionsModeAccepted": True}


class ClaudeSession(CliSession):
    """Reads `claude -p --output-format stream-json` events: the last `result`, the last assistant text."""

    def __init__(self) -> None:
        self.result: dict | None = None
        self.last_text: str | None = None

    def fold(self, event: dict) -> None:
        kind = event.get("type")
        if kind == "result":
            self.result = event
        elif kind == "assistant":
            message = event.get("message")
            content = message.get("content") if isinstance(message, dict) else None
            texts = [b.get("text") for b in content or [] if isinstance(b, dict) and b.get("type") == "text"]
            text = "".join(t for t in texts if isinstance(t, str))
            if text:
                self.last_text = text

    def reported_usage(self) -> dict | None:
        result = self.result
        if result is None:
            return None
        usage = result["usage"] if isinstance(result.get("usage"), dict) else {}
        uncached, read, write = (as_count(usage.get(k)) for k in
                                 ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"))
        total = None if uncached is None else uncached + (read or 0) + (write or 0)
        cost = result.get("total_cost_usd")
        cost = float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) and cost >= 0 else None
        return usage_dict(total, read, write, as_count(usage.get("output_tokens")), None, cost)

    def final_report(self) -> dict | None:
        result = self.result
        if result is not None:
            if isinstance(result.get("structured_output"), dict):
                return result["structured_output"]
            if isinstance(result.get("result"), str):
                return last_json_object(result["result"])
        return last_json_object(self.last_text) if self.last_text else None

    def limit(self, llm: LlmAccess) -> str | None:
        if self.result is not None and self.result.get("subtype") == "error_max_turns":
            return f"max_turns={llm.max_turns}" if llm.max_turns is not None else "max_turns"
        return None


class ClaudeCodeAgent(LlmCliAgent):
    """The `claude_code` kind; see the module docstring."""

    name = "claude_code"
    cli = "claude"

    def cli_args(self, prompt: str, llm: LlmAccess) -> list[str]:
        args = ["-p", prompt, "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions"]
        if llm.model:
            args += ["--model", llm.model]
        if llm.max_turns is not None:
            args += ["--max-turns", str(llm.max_turns)]
        return [*args, *(self.spec.extra_args if self.spec else [])]

    def cli_env(self, ctx: AgentContext, llm: LlmAccess, home: str) -> dict[str, str]:
        return {"CLAUDE_CONFIG_DIR": home, "IS_SANDBOX": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "ANTHROPIC_BASE_URL": llm.base_url.rstrip("/"), "ANTHROPIC_API_KEY": llm.api_key}

    def home_files(self, ctx: AgentContext, llm: LlmAccess) -> dict[str, str]:
        return {".claude.json": json.dumps(ONBOARDING) + "\n"}

    def session(self) -> ClaudeSession:
        return ClaudeSession()
