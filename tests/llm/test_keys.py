"""Sealing the LLM keys for the node's proxy, and keeping them out of what Ray inherits."""

from __future__ import annotations

import os
import pickle

import pytest

from reb_ray.llm.keys import KNOWN_KEY_VARS, KeyInbox, scrubbed, seal
from reb_ray.models.agent import KIND_DEFAULTS

KEY = "sk-REALKEY-sealed-7a6b5c4d3e2f1a0b"


def test_sealed_keys_open_only_in_their_inbox_and_the_box_never_holds_a_key():
    inbox = KeyInbox()
    sealed = seal(inbox.public_key, {"ANTHROPIC_API_KEY": KEY})
    assert KEY.encode() not in pickle.dumps(sealed) and KEY not in repr(inbox)
    assert inbox.open(sealed) == {"ANTHROPIC_API_KEY": KEY}
    # Two seals of the same keys differ (a fresh sender key and nonce each time).
    assert seal(inbox.public_key, {"ANTHROPIC_API_KEY": KEY})["box"] != sealed["box"]
    with pytest.raises(ValueError, match="not sealed to this inbox"):
        KeyInbox().open(sealed)
    altered = {**sealed, "box": bytes([sealed["box"][0] ^ 1]) + sealed["box"][1:]}
    with pytest.raises(ValueError, match="altered on the way"):
        inbox.open(altered)
    with pytest.raises(ValueError):
        inbox.open({"sender": b"short"})


def test_scrubbed_takes_the_provider_keys_out_and_puts_back_exactly_what_was_there(monkeypatch):
    assert {k for _, k in KIND_DEFAULTS.values() if k} <= set(KNOWN_KEY_VARS)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("MY_AGENT_KEY", "agent-secret")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("PATH_KEPT", "1")
    with scrubbed(["MY_AGENT_KEY"]) as removed:
        assert removed == ["MY_AGENT_KEY", "OPENAI_API_KEY"]
        assert "OPENAI_API_KEY" not in os.environ and "MY_AGENT_KEY" not in os.environ
        assert os.environ["PATH_KEPT"] == "1"
    assert os.environ["OPENAI_API_KEY"] == KEY and os.environ["MY_AGENT_KEY"] == "agent-secret"
    assert "ANTHROPIC_API_KEY" not in os.environ  # not there before: not made up after
