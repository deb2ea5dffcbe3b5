"""A scripted LLM session: the turns the scripted endpoint answers, in order, validated.

A script (TOML or JSON) is a table with optional settings and a list of turns:

    model = "scripted-model"          # the model name responses report
    [[turns]]
    kind = "tool"                     # a shell command the real CLI executes
    command = "echo hi > /tmp/x"
    text = "Writing the file."        # optional text before the tool call
    usage = { input_tokens = 1200, cached_input_tokens = 1000, output_tokens = 40 }
    [[turns]]
    kind = "message"                  # the final answer
    text = "Done."
    [[turns]]
    kind = "error"                    # an HTTP error: 429 / 500 / 402 budget / ...
    status = 429
    retry_after_s = 1
    repeat = 3                        # this turn three times (a 429 storm)
    [[turns]]
    kind = "hang"                     # accepts the request and never answers

Usage numbers follow reb_ray.llm.usage's convention (input includes cached and cache-written
tokens; output includes reasoning); each API reports what it can express of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from reb_ray.llm.files import read_data, validate
from reb_ray.llm.usage import Usage


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ScriptUsage(_Strict):
    """The usage one response reports (token counts, >= 0)."""

    input_tokens: int = Field(default=0, ge=0)
    cached_input_tokens: int = Field(default=0, ge=0)
    cache_write_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    reasoning_tokens: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _parts_fit(self) -> ScriptUsage:
        if self.cached_input_tokens + self.cache_write_tokens > self.input_tokens:
            raise ValueError("cached_input_tokens + cache_write_tokens must not exceed input_tokens")
        if self.reasoning_tokens > self.output_tokens:
            raise ValueError("reasoning_tokens must not exceed output_tokens")
        return self

    def as_usage(self) -> Usage:
        return Usage(**self.model_dump())


class _Turn(_Strict):
    delay_s: float = Field(default=0.0, ge=0, description="wait this long before answering")
    repeat: int = Field(default=1, ge=1, description="this turn this many times in a row")


class ToolTurn(_Turn):
    """A tool call: `command` for the CLI's shell tool (found among the tools the request
    offers, its command argument filled by name), or `tool` + `arguments` verbatim."""

    kind: Literal["tool"]
    command: str | None = None
    tool: str | None = None
    arguments: dict[str, Any] | None = None
    text: str = ""
    usage: ScriptUsage = ScriptUsage()

    @model_validator(mode="after")
    def _one_call(self) -> ToolTurn:
        if (self.command is None) == (self.arguments is None):
            raise ValueError("give exactly one of command or arguments")
        if self.arguments is not None and not self.tool:
            raise ValueError("arguments needs tool (the tool's name)")
        return self


class MessageTurn(_Turn):
    """A final (or intermediate) assistant message without a tool call."""

    kind: Literal["message"]
    text: str
    usage: ScriptUsage = ScriptUsage()


class ErrorTurn(_Turn):
    """An HTTP error in the API's error shape, with `retry-after` when given."""

    kind: Literal["error"]
    status: int = Field(ge=400, le=599)
    message: str | None = None
    retry_after_s: float | None = Field(default=None, ge=0)
    error_type: str | None = None


class HangTurn(_Turn):
    """Accepts the request and answers nothing: for `seconds` (then the connection is
    dropped), or until the client gives up when `seconds` is not set."""

    kind: Literal["hang"]
    seconds: float | None = Field(default=None, gt=0)


AnyTurn = Union[ToolTurn, MessageTurn, ErrorTurn, HangTurn]
TURN_KINDS = frozenset({"tool", "message", "error", "hang"})
Turn = Annotated[Union[ToolTurn, MessageTurn, ErrorTurn, HangTurn], Field(discriminator="kind")]
DEFAULT_ERROR_MESSAGES = {401: "invalid api key (scripted)", 402: "budget exceeded (scripted)",
                          403: "permission denied (scripted)", 429: "rate limit exceeded (scripted)",
                          500: "internal server error (scripted)", 503: "service unavailable (scripted)"}


class Script(_Strict):
    """A validated script; `turns()` unrolls `repeat`, `total_usage()` sums what it reports."""

    model: str = "scripted-model"
    text_fence: str = Field(default="mswea_bash_command",
                            description="code-fence language of a command when the request offers no tools "
                                        "(mini-swe-agent's text-based mode)")
    stream_chunks: int = Field(default=3, ge=1, description="text/argument deltas per streamed block")
    created: int = Field(default=1_700_000_000, description="the fixed `created` timestamp (deterministic bytes)")
    turns_: list[Turn] = Field(alias="turns", min_length=1)
    _unrolled: list | None = PrivateAttr(default=None)

    def turns(self) -> list[AnyTurn]:
        """The turns in order, each `repeat` times (computed once; do not modify the list)."""
        if self._unrolled is None:
            self._unrolled = [turn for turn in self.turns_ for _ in range(turn.repeat)]
        return self._unrolled

    def total_usage(self) -> Usage:
        """The sum of the usage every answered model turn reports (error/hang turns report none)."""
        total = Usage(0, 0, 0, 0, 0)
        for turn in self.turns():
            if isinstance(turn, (ToolTurn, MessageTurn)):
                total = total + turn.usage.as_usage()
        return total


def load_script(path: Path | str) -> Script:
    """The script in `path` (`.json` as JSON, else TOML); LLMFileError (one line naming the
    file, field and value) when it cannot be read or does not validate."""
    return validate(Script, read_data(Path(path)), path, TURN_KINDS)


def script_from(data: dict, name: str = "<script>") -> Script:
    """A script from an in-memory table (tests, programmatic use); same errors as load_script."""
    return validate(Script, data, name, TURN_KINDS)
