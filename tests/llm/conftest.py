"""Fixtures for the llm tests: a real scripted endpoint, a real proxy (the fake "real" key is the
shared `real_key` fixture)."""

from __future__ import annotations

import pytest

from reb_ray.llm.proxy import ProxyServer
from reb_ray.llm.scripted import ScriptedEndpoint, script_from

# Three turns with distinct numbers in every field, so a swapped or dropped field shows.
THREE_TURNS = {
    "model": "claude-sonnet-4-5",
    "turns": [
        {"kind": "tool", "command": "echo hi > /tmp/x", "text": "Writing the file.",
         "usage": {"input_tokens": 1200, "cached_input_tokens": 700, "cache_write_tokens": 300,
                   "output_tokens": 45, "reasoning_tokens": 12}},
        {"kind": "tool", "command": "cat /tmp/x",
         "usage": {"input_tokens": 1500, "cached_input_tokens": 1100, "cache_write_tokens": 200,
                   "output_tokens": 31, "reasoning_tokens": 7}},
        {"kind": "message", "text": "Done: /tmp/x holds hi.",
         "usage": {"input_tokens": 1800, "cached_input_tokens": 1600, "cache_write_tokens": 0,
                   "output_tokens": 20, "reasoning_tokens": 0}},
    ],
}


@pytest.fixture
def endpoint():
    with ScriptedEndpoint(script_from(THREE_TURNS)) as ep:
        yield ep


@pytest.fixture
def proxy():
    with ProxyServer() as px:
        yield px
