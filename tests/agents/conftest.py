"""An agent toolchain with the real pinned CLIs, installed once per node (idempotent)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def installed_toolchain(docker_client, sandbox_image):
    """This node's toolchain (Toolchain.current()) with codex, claude_code and mini_swe_agent:
    about 50 s and 1.7 GB the first time on a node, a no-op afterwards."""
    from reb_ray.agents.toolchain import Toolchain
    from reb_ray.agents.toolchain_install import install

    toolchain = Toolchain.current()
    install(["codex", "claude_code", "mini_swe_agent"], toolchain, image=sandbox_image, client=docker_client)
    return toolchain


@pytest.fixture
def real_key(monkeypatch) -> str:
    """The "real" LLM key, in the driver's environment only (the proxy reads it from there)."""
    from tests.agents.llm_session import REAL_KEY, REAL_KEY_ENV

    monkeypatch.setenv(REAL_KEY_ENV, REAL_KEY)
    return REAL_KEY
