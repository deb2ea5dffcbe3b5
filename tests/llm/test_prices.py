"""Cost from tokens: the shipped table's arithmetic by hand, overrides, unknown stays None."""

from __future__ import annotations

import pytest

from reb_ray.llm.files import LLMFileError
from reb_ray.llm.prices import SHIPPED, PriceTable, cost_usd
from reb_ray.llm.usage import Usage


def test_anthropic_cost_by_hand():
    # claude-sonnet-4-5: $3 input, $0.30 cache read, $3.75 cache write, $15 output per MTok.
    usage = Usage(input_tokens=10_000, cached_input_tokens=6_000, cache_write_tokens=1_000, output_tokens=500)
    value, source = cost_usd("claude-sonnet-4-5", usage)
    assert source == "price_table"
    assert value == pytest.approx((3_000 * 3.00 + 6_000 * 0.30 + 1_000 * 3.75 + 500 * 15.00) / 1e6)  # $0.02205
    assert value == pytest.approx(0.02205)


def test_openai_cost_by_hand_reasoning_is_output_and_writes_cost_input():
    # gpt-5.1-codex: $1.25 input, $0.125 cached, $10 output; no cache-write surcharge.
    usage = Usage(input_tokens=20_000, cached_input_tokens=15_000, output_tokens=2_000, reasoning_tokens=1_500)
    by_hand = (5_000 * 1.25 + 15_000 * 0.125 + 2_000 * 10.00) / 1e6
    assert cost_usd("gpt-5.1-codex", usage) == (pytest.approx(by_hand), "price_table")
    assert by_hand == pytest.approx(0.028125)
    written = Usage(input_tokens=1_000_000, cache_write_tokens=1_000_000, output_tokens=0)
    assert cost_usd("gpt-5", written) == (pytest.approx(1.25), "price_table")


def test_unknown_is_none_never_zero():
    usage = Usage(input_tokens=100, output_tokens=10)
    assert cost_usd("my-local-llm", usage) == (None, "unknown")
    assert cost_usd(None, usage) == (None, "unknown")
    assert cost_usd("claude-sonnet-4-5", Usage(input_tokens=100)) == (None, "unknown")  # output unknown
    assert cost_usd("claude-sonnet-4-5", Usage(100, 200, None, 5)) == (None, "unknown")  # cached > input
    assert cost_usd("my-local-llm", usage, agent_reported_usd=0.42) == (0.42, "agent_reported")
    # The table's figure wins over the agent's own when the model is priced.
    assert cost_usd("gpt-5", Usage(1_000_000, 0, None, 0), agent_reported_usd=9.0) == (pytest.approx(1.25), "price_table")


def test_lookup_by_alias_date_suffix_and_provider_prefix_but_never_by_prefix():
    table = PriceTable()
    sonnet = table.lookup("claude-sonnet-4-5")
    assert table.lookup("claude-sonnet-4-5-20250929") is sonnet
    assert table.lookup("anthropic/Claude-Sonnet-4-5") is sonnet
    assert table.lookup("gpt-5-mini-2025-08-07").output == 2.00
    assert table.lookup("gpt-5.1-codex-max") is None and table.lookup("gpt-5.1-codex-mini").input == 0.25


def test_shipped_table_is_versioned_and_names_its_sources():
    text = SHIPPED.read_text()
    table = PriceTable()
    assert table.version == "2026-12-01" and "https://platform.claude.com/docs/en/about-claude/pricing" in text
    assert {"claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5", "gpt-5", "gpt-5.1-codex",
            "gpt-5-mini"} <= set(table.models())


def test_a_user_file_overrides_and_extends(tmp_path):
    path = tmp_path / "my-prices.toml"
    path.write_text('version = "v3"\n[models."gpt-5"]\ninput = 1.0\ncached_input = 0.1\noutput = 8.0\n'
                    '[models."my-local-llm"]\ninput = 0\ncached_input = 0\noutput = 0\n')
    table = PriceTable(path)
    assert table.version == "2026-12-01+my-prices.toml@v3"
    assert cost_usd("gpt-5", Usage(1_000_000, 0, None, 1_000_000), table=table) == (pytest.approx(9.0), "price_table")
    assert cost_usd("my-local-llm", Usage(5, 0, None, 5), table=table) == (0.0, "price_table")  # priced at 0: known
    assert table.lookup("claude-haiku-4-5").input == 1.00  # the rest of the shipped table stays


@pytest.mark.parametrize(("text", "message"), [
    ('version = "1"\n[models.x]\ninput = -1\ncached_input = 0\noutput = 1\n',
     "models.x.input = -1: Input should be greater than or equal to 0"),
    ('version = "1"\n[models.x]\ninput = 1\noutput = 1\n', "models.x.cached_input: Field required"),
    ('[models.x]\ninput = 1\ncached_input = 0\noutput = 1\n', "version: Field required"),
    ('version = "1"\n', "models: no [models.NAME] table"),
])
def test_a_bad_user_file_is_one_line(tmp_path, text, message):
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(LLMFileError) as info:
        PriceTable(path)
    assert str(info.value).startswith(f"{path}: ") and message in str(info.value)
