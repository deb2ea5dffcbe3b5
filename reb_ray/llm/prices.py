"""What a trial's tokens cost: a versioned price table shipped with the package, user-overridable.

The shipped table is `reb_ray/llm/prices.toml` (its header names the sources and the date they
were read). A user file in the same format replaces whole model entries and adds new ones. Cost
never guesses: a model the table does not price costs None with source `unknown`, not 0.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from reb_ray.llm.files import LLMFileError, read_data, validate
from reb_ray.llm.usage import Usage

SHIPPED = Path(__file__).with_name("prices.toml")
#: "no_model": an agent known to call no model (Agent.calls_no_model): $0 and 0 tokens, known.
COST_SOURCES = ("price_table", "agent_reported", "unknown", "no_model")
_DATE_SUFFIX = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2})$")


class ModelPrice(BaseModel):
    """USD per million tokens. `cache_write` None means writes cost the input price (OpenAI)."""

    model_config = ConfigDict(extra="forbid")
    input: float = Field(ge=0)
    cached_input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_write: float | None = Field(default=None, ge=0)
    aliases: list[str] = []


class PriceFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    version: str
    checked: str | None = None
    sources: list[str] = []
    models: dict[str, ModelPrice] = {}


class PriceTable:
    """Model name -> ModelPrice, from the shipped file and optionally a user file on top.

    `version` names what was used, e.g. `2026-12-01` or `2026-12-01+my-prices.toml@v3`: it
    goes into each row beside the cost, so a cost can be recomputed or audited later.
    Raises LLMFileError (one line: file, field, value) for a malformed file.
    """

    def __init__(self, user_file: Path | str | None = None) -> None:
        shipped = validate(PriceFile, read_data(SHIPPED), SHIPPED)
        self.version = shipped.version
        self._prices: dict[str, ModelPrice] = {}
        self._names: set[str] = set()
        self._add(shipped, SHIPPED)
        if user_file is not None:
            user = validate(PriceFile, read_data(Path(user_file)), user_file)
            self._add(user, Path(user_file))
            self.version = f"{shipped.version}+{Path(user_file).name}@{user.version}"

    def _add(self, file: PriceFile, path: Path) -> None:
        for name, price in file.models.items():
            self._names.add(name.lower())
            for key in (name, *price.aliases):
                self._prices[key.lower()] = price
        if not file.models and path != SHIPPED:
            raise LLMFileError(f"{path}: models: no [models.NAME] table; nothing to price")

    def lookup(self, model: str | None) -> ModelPrice | None:
        """The price of `model`: exact name or alias (case-insensitive), else the same name
        without a provider prefix (`anthropic/`, `openai/`) and without a date suffix
        (`-20250929`, `-2025-08-07`). None when not priced; no fuzzy or prefix matching, which
        would price `gpt-5.1-codex-max` as `gpt-5.1-codex`."""
        if not model:
            return None
        name = model.strip().lower()
        for candidate in (name, name.rsplit("/", 1)[-1]):
            for key in (candidate, _DATE_SUFFIX.sub("", candidate)):
                if key in self._prices:
                    return self._prices[key]
        return None

    def models(self) -> list[str]:
        """The priced model names (aliases left out), sorted."""
        return sorted(self._names)


@lru_cache(maxsize=8)
def price_table(user_file: str | None = None) -> PriceTable:
    """The (cached) table for `user_file` (a path string, or None for the shipped table only)."""
    return PriceTable(user_file)


def cost_usd(model: str | None, usage: Usage, *, agent_reported_usd: float | None = None,
             table: PriceTable | None = None) -> tuple[float | None, str]:
    """(USD, cost_source) of `usage` tokens of `model`.

    From the price table when it prices the model and `usage` has input and output counts:
    (input - cached - cache_write) x input + cached x cached_input + cache_write x cache_write
    (input when the model has no cache-write price) + output x output, per million tokens; a
    cached or cache-write count the API did not report counts as 0. Otherwise the agent's own
    figure when given (`agent_reported`), else (None, `unknown`). Inconsistent usage (more
    cached than input tokens) is `unknown` too: it cannot be priced honestly.
    """
    table = table or price_table()
    price = table.lookup(model)
    if price is not None and usage.input_tokens is not None and usage.output_tokens is not None:
        cached = usage.cached_input_tokens or 0
        written = usage.cache_write_tokens or 0
        uncached = usage.input_tokens - cached - written
        if uncached >= 0:
            write_price = price.input if price.cache_write is None else price.cache_write
            total = (uncached * price.input + cached * price.cached_input + written * write_price
                     + usage.output_tokens * price.output) / 1e6
            return total, "price_table"
    if agent_reported_usd is not None and agent_reported_usd >= 0:
        return float(agent_reported_usd), "agent_reported"
    return None, "unknown"
