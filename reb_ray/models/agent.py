"""Agent specs: a named row of the sweep's agent table (`[agents.NAME]` in sweep.toml, or
`--agents kind@model,...` on the command line).

    [agents.sonnet]
    kind = "claude_code"
    model = "claude-sonnet-4-5"
    max_turns = 60
    max_cost_usd = 2.0

    [agents.my-cli]
    kind = "command"
    command = ["my-agent", "--prompt", "{prompt_file}", "--repo", "{repo_root}", "--out", "{report_path}"]
    report_mode = "file"          # or "output": the report is the agent's last JSON output line
    base_url = "https://api.openai.com/v1"   # its requests go through the node's metering proxy
    key_env = "MY_AGENT_KEY"      # the real key stays with the proxy; the sandbox gets a stand-in
    env = { OPENAI_BASE_URL = "{llm_base_url}" }

A spec's NAME is what the trials' `agent` column holds. Its identity (kind, model, arguments,
limits: `identity()`) goes into the sweep id, so a changed model is a different sweep; the
endpoint URL and the key variable do not (a moved endpoint port must not make a finished sweep
run again).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

#: LLM CLI kinds whose runners live in reb_ray/agents/<kind>.py (one file per kind).
LLM_KINDS = ("codex", "claude_code", "mini_swe_agent", "nexau")
BUILTIN_KINDS = ("heuristic", "noop", "reference")
KINDS = (*LLM_KINDS, "command", *BUILTIN_KINDS)
#: The vendor endpoint and the variable holding the key, per kind (the CLIs' own defaults).
KIND_DEFAULTS: dict[str, tuple[str | None, str | None]] = {
    "codex": ("https://api.openai.com/v1", "OPENAI_API_KEY"),
    "claude_code": ("https://api.anthropic.com", "ANTHROPIC_API_KEY"),
    "mini_swe_agent": ("https://api.openai.com/v1", "OPENAI_API_KEY"),
    "nexau": ("https://api.openai.com/v1", "OPENAI_API_KEY"),
}

#: Provider key variables: the kinds' defaults, plus those the CLIs (litellm, codex) read themselves.
KNOWN_KEY_VARS: tuple[str, ...] = tuple(sorted({k for _, k in KIND_DEFAULTS.values() if k} | {
    "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY", "CODEX_API_KEY", "AZURE_OPENAI_API_KEY",
    "AZURE_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "MISTRAL_API_KEY", "DEEPSEEK_API_KEY",
    "OPENROUTER_API_KEY", "TOGETHER_API_KEY", "TOGETHERAI_API_KEY", "GROQ_API_KEY", "XAI_API_KEY",
    "FIREWORKS_API_KEY", "COHERE_API_KEY", "HUGGINGFACE_API_KEY", "DASHSCOPE_API_KEY", "MOONSHOT_API_KEY",
    "LITELLM_API_KEY", "LLM_API_KEY"}))
#: Placeholders a `command` argv template may use. `llm_base_url` (also in `env` values) is the
#: node's metering proxy as the sandbox reaches it; it needs `base_url`.
PLACEHOLDERS = ("prompt_file", "repo_root", "report_path", "llm_base_url")
LLM_PLACEHOLDER = "{llm_base_url}"
ReportMode = Literal["file", "output"]

_CLASS_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PLACEHOLDER = re.compile(r"\{(\w+)\}")
#: Fields that decide what a trial does (the sweep id covers them); the rest is volatile.
IDENTITY_FIELDS = ("kind", "model", "extra_args", "max_turns", "max_cost_usd", "command", "report_mode", "env")


class AgentSpec(BaseModel):
    """One agent of a sweep.

    `kind` is one of KINDS or an import path `package.module:Class`. `base_url` and `key_env`
    default per kind (KIND_DEFAULTS). `max_cost_usd` is USD per trial, `max_concurrent` the
    number of trials of this agent at once (an endpoint's rate limit). `command` (kind
    `command` only) is an argv template with `{prompt_file}`, `{repo_root}`, `{report_path}`;
    `report_mode` says whether the agent writes the report file (`file`) or prints the report
    as its last JSON line (`output`). `env` holds plain (non-secret) variables for the agent.

    A `command` agent with `base_url` is an LLM agent like the CLI kinds: the node's metering
    proxy relays its requests to `base_url` with the real key, and the sandbox sees the proxy as
    `{llm_base_url}` (in `command` and `env` values) and only a per-trial stand-in key in
    `key_env`. A `command` agent's `key_env` therefore needs `base_url`: no real key is ever
    passed into a sandbox.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    kind: str
    model: str | None = None
    base_url: str | None = None
    key_env: str | None = None
    extra_args: list[str] = Field(default_factory=list)
    max_turns: int | None = Field(default=None, ge=1)
    max_cost_usd: float | None = Field(default=None, gt=0)
    max_concurrent: int | None = Field(default=None, ge=1)
    command: list[str] | None = None
    report_mode: ReportMode = "file"
    env: dict[str, str] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if any(c.isspace() for c in value) or "," in value:
            raise PydanticCustomError("agent_name", "an agent name has no spaces or commas")
        return value

    @field_validator("kind")
    @classmethod
    def _kind(cls, value: str) -> str:
        if value not in KINDS and not _CLASS_PATH.match(value):
            raise PydanticCustomError("agent_kind", "unknown agent kind {kind}; valid: {valid}, or package.module:Class",
                                      {"kind": repr(value), "valid": ", ".join(KINDS)})
        return value

    @field_validator("key_env")
    @classmethod
    def _key_env(cls, value: str | None) -> str | None:
        # `key_env = ""`: no key at all (TOML has no null), for an endpoint that needs none, e.g.
        # a local server; the trial's stand-in key then reaches it, one per trial.
        if value == "":
            return None
        if value is not None and not _ENV_NAME.match(value):
            raise PydanticCustomError("env_name", "not an environment variable name")
        return value

    @field_validator("command")
    @classmethod
    def _command(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        if not value or not value[0]:
            raise PydanticCustomError("command", "an argv template needs at least a program")
        for arg in value:
            for name in _PLACEHOLDER.findall(arg):
                if name not in PLACEHOLDERS:
                    raise PydanticCustomError("placeholder", "unknown placeholder {placeholder} in {arg}; valid: {valid}",
                                              {"placeholder": "{%s}" % name, "arg": repr(arg),
                                               "valid": ", ".join("{%s}" % p for p in PLACEHOLDERS)})
        return value

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data):
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "kind" not in data and data.get("name") in KINDS:  # `[agents.heuristic]` means kind heuristic
            data["kind"] = data["name"]
        base_url, key_env = KIND_DEFAULTS.get(str(data.get("kind")), (None, None))
        data.setdefault("base_url", base_url)
        data.setdefault("key_env", key_env)
        return data

    @model_validator(mode="after")
    def _command_kind(self) -> "AgentSpec":
        if self.kind == "command" and self.command is None:
            raise PydanticCustomError("command", "kind 'command' needs a command (an argv template)")
        if self.kind != "command" and self.command is not None:
            raise PydanticCustomError("command", "only kind 'command' takes a command (this is {kind})", {"kind": repr(self.kind)})
        if self.kind == "command" and self.base_url is None:
            if self.key_env is not None:
                raise PydanticCustomError(
                    "key_env", "a command agent's key_env {key} needs base_url: the real key is held by the node's "
                    "metering proxy, which relays to base_url, and never enters the sandbox", {"key": self.key_env})
            uses = [v for v in (*(self.command or []), *self.env.values()) if LLM_PLACEHOLDER in v]
            if uses:
                raise PydanticCustomError("placeholder", "{placeholder} in {arg} needs base_url (the endpoint the "
                                          "proxy relays to)", {"placeholder": LLM_PLACEHOLDER, "arg": repr(uses[0])})
        return self

    @classmethod
    def from_shorthand(cls, text: str) -> "AgentSpec":
        """`kind`, `kind@model` or `package.module:Class` as one spec named `text`.

        Raises pydantic.ValidationError (an unknown kind, an empty model).
        """
        kind, at, model = text.strip().partition("@")
        if at and not model:
            raise PydanticCustomError("agent_model", "{text} has an empty model after '@'", {"text": repr(text)})
        return cls(name=text.strip(), kind=kind, model=model or None)

    def identity(self) -> dict:
        """The fields that define what a trial of this agent does (for the sweep id)."""
        return self.model_dump(include=set(IDENTITY_FIELDS))

    def render_command(self, prompt_file: str, repo_root: str, report_path: str,
                       llm_base_url: str | None = None) -> list[str]:
        """The `command` argv with its placeholders filled (only PLACEHOLDERS; other braces stay)."""
        values = {"prompt_file": prompt_file, "repo_root": repo_root, "report_path": report_path}
        if llm_base_url is not None:
            values["llm_base_url"] = llm_base_url
        return [_PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), arg) for arg in self.command or []]

    def render_env(self, llm_base_url: str | None = None) -> dict[str, str]:
        """`env` with `{llm_base_url}` filled in its values (no other placeholder is read there)."""
        if llm_base_url is None:
            return dict(self.env)
        return {k: v.replace(LLM_PLACEHOLDER, llm_base_url) for k, v in self.env.items()}
