"""`codex`: OpenAI's Codex CLI (`@openai/codex`, pinned in `toolchain.PINS`), headless.

    codex exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox PROMPT [extra_args] < /dev/null

run in the repository root by the shared LLM CLI run (`LlmCliAgent`). Choices, and
why (each checked by running the pinned version):

- Its own sandbox is off: Landlock and bubblewrap do not work under Docker's default seccomp
  profile, and our container is the sandbox.
- `CODEX_HOME` is a fresh state directory beside the repository, not under /tmp (there codex
  refuses to create its helper binaries), holding `config.toml`: a custom model provider
  `reb-ray` (overriding the built-in `openai` one is ignored) on the Responses API
  (`wire_api = "responses"`) at `ctx.llm.base_url + "/v1"`, its key read from
  KEY_ENV (the trial's stand-in key, kept out of the commands codex runs by
  `shell_environment_policy.exclude`), analytics off, and the spec's model when it names one.
- The JSON events on stdout are the transcript. Usage is the sum of the `turn.completed`
  events' `usage` (input_tokens includes cached_input_tokens; output_tokens includes
  reasoning_output_tokens, as the Responses API reports them); codex's
  `cache_write_input_tokens` is left out because the Responses API cannot express cache writes
  (it is always 0 there: unknown, not zero). Codex reports no cost.
- The report: the agent's file; when there is none, the last JSON object in its last
  `agent_message` (`report_source = forced_from_output`).
- Codex has no turn limit of its own: `max_turns` is not enforced by this runner (the agent
  timeout and the proxy's cost limit still apply).
"""

from __future__ import annotations

import json

from reb_ray.agents.base import AgentContext, LlmAccess
from reb_ray.agents.command import last_json_object
from reb_ray.agents.llm_cli import CliSession, LlmCliAgent, as_count, usage_dict

#: The variable holding the stand-in key (`env_key` of the provider in config.toml).
KEY_ENV = "REB_RAY_LLM_KEY"
PROVIDER = "reb-ray"


def config_toml(llm: LlmAccess) -> str:
    """CODEX_HOME/config.toml for `llm` (strings written as TOML basic strings)."""
    lines = [f"model_provider = {json.dumps(PROVIDER)}"]
    if llm.model:
        lines.append(f"model = {json.dumps(llm.model)}")
    lines += ["", f"[model_providers.{json.dumps(PROVIDER)}]", f"name = {json.dumps(PROVIDER)}",
              f"base_url = {json.dumps(llm.base_url.rstrip('/') + '/v1')}", f"env_key = {json.dumps(KEY_ENV)}",
              'wire_api = "responses"', "", "[analytics]", "enabled = false", "",
              # The stand-in key is codex's own business, not its commands'.
              "[shell_environment_policy]", f"exclude = [{json.dumps(KEY_ENV)}]", ""]
    return "\n".join(lines)


class CodexSession(CliSession):
    """Reads `codex exec --json` events: usage summed over `turn.completed`, the last agent message."""

    def __init__(self) -> None:
        self.turns: list[dict] = []
        self.last_message: str | None = None

    def fold(self, event: dict) -> None:
        kind = event.get("type")
        if kind == "turn.completed" and isinstance(event.get("usage"), dict):
            self.turns.append(event["usage"])
        elif kind == "item.completed":
            item = event.get("item")
            if isinstance(item, dict) and item.get("type") == "agent_message" and isinstance(item.get("text"), str):
                self.last_message = item["text"]

    def reported_usage(self) -> dict | None:
        if not self.turns:
            return None

        def total(key: str) -> int | None:
            values = [as_count(u.get(key)) for u in self.turns]
            return None if any(v is None for v in values) else sum(v for v in values if v is not None)

        return usage_dict(total("input_tokens"), total("cached_input_tokens"), None, total("output_tokens"),
                          total("reasoning_output_tokens"))

    def final_report(self) -> dict | None:
        return last_json_object(self.last_message) if self.last_message else None


class CodexAgent(LlmCliAgent):
    """The `codex` kind; see the module docstring."""

    name = "codex"
    cli = "codex"

    def cli_args(self, prompt: str, llm: LlmAccess) -> list[str]:
        extra = list(self.spec.extra_args) if self.spec else []
        return ["exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", prompt, *extra]

    def cli_env(self, ctx: AgentContext, llm: LlmAccess, home: str) -> dict[str, str]:
        return {"CODEX_HOME": home, KEY_ENV: llm.api_key}

    def home_files(self, ctx: AgentContext, llm: LlmAccess) -> dict[str, str]:
        return {"config.toml": config_toml(llm)}

    def session(self) -> CodexSession:
        return CodexSession()
