"""Local-provider rules beyond the shared conformance suite."""

from __future__ import annotations

import pytest

from reb_ray.errors import UnknownName, UnsafeSandbox
from reb_ray.sandbox import SandboxConfig, open_sandbox


def test_refuses_untrusted_agents_without_explicit_flag():
    with pytest.raises(UnsafeSandbox, match="--unsafe-local"):
        open_sandbox("local", SandboxConfig())
    with open_sandbox("local", SandboxConfig(), allow_unsafe=True) as sb:
        assert sb.exec("true").ok


def test_host_secrets_and_cuda_devices_do_not_leak(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-value")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")
    with open_sandbox("local", SandboxConfig(gpus=["1"]), trusted=True) as sb:
        out = sb.exec("env").output
    assert "sk-secret-value" not in out
    assert "CUDA_VISIBLE_DEVICES=1" in out


def test_unknown_provider_lists_valid_names():
    with pytest.raises(UnknownName, match="valid: docker, local, podman, sleep"):
        open_sandbox("apptainer", SandboxConfig())
