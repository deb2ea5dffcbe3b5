"""The hosts a `registries` sandbox may reach through its egress proxy.

A pattern is a host name (`pypi.org`: that name only), a wildcard (`*.anaconda.org`: any name
below it, not the name itself), or an IPv4 address, each optionally with `:PORT`. Without a
port a pattern allows ports 80 and 443 (plain HTTP and TLS); with one, that port only. Names
compare case-insensitively, without a trailing dot. Anything else (a URL, a path, a bare `*`)
is refused with a one-line error naming the pattern.

DEFAULT_ALLOW is the package registries an environment build needs (why each is there:
docs/DECISIONS.md, "Network"). Model weights and data sets are not packages:
Hugging Face is not in it (the probes' assets come from the asset cache); add
`huggingface.co`, `*.huggingface.co`, `*.hf.co` to `network_allow` when a task's build needs it.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

DEFAULT_ALLOW = (
    "pypi.org", "files.pythonhosted.org",  # PyPI: the index and its files
    "download.pytorch.org",  # PyTorch's own index (CUDA builds of torch, torchvision, torchaudio)
    "pypi.nvidia.com",  # NVIDIA's extra index (cuDF, TensorRT, ...)
    "deb.debian.org", "security.debian.org",  # Debian: the image's apt sources and its security updates
    "registry.npmjs.org",  # npm
    "conda.anaconda.org", "repo.anaconda.com",  # conda: channels (conda-forge included) and Anaconda's defaults
)
DEFAULT_PORTS = (80, 443)

_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_NAME = re.compile(rf"^(\*\.)?{_LABEL}(?:\.{_LABEL})*$")


@dataclass(frozen=True)
class Pattern:
    """One parsed pattern: `host` (lowercase; for a wildcard the suffix after `*.`), whether it
    is a wildcard, and `port` (None: DEFAULT_PORTS)."""

    host: str
    wildcard: bool
    port: int | None

    def matches(self, host: str, port: int) -> bool:
        """Whether `host:port` (host already normalised by `normal_host`) is allowed by this pattern."""
        if port not in ((self.port,) if self.port is not None else DEFAULT_PORTS):
            return False
        return host.endswith("." + self.host) if self.wildcard else host == self.host


def normal_host(host: str) -> str:
    """A host as patterns compare it: lowercase, no trailing dot, no IPv6 brackets."""
    return host.strip().strip("[]").rstrip(".").lower()


def parse_pattern(text: str) -> Pattern:
    """The Pattern `text` spells. Raises ValueError (one line naming it) for anything else."""
    raw = text.strip().lower()
    host, port = raw, None
    if "/" not in raw and raw.count(":") == 1:
        host, _, digits = raw.partition(":")
        if not digits.isdigit() or not 0 < int(digits) < 65536:
            raise ValueError(f"host pattern {text!r}: the port must be a number from 1 to 65535")
        port = int(digits)
    host = host.rstrip(".")
    try:
        ipaddress.IPv4Address(host)
        return Pattern(host, False, port)
    except ValueError:
        pass
    if not _NAME.match(host):
        raise ValueError(f"host pattern {text!r}: expected a host name, `*.domain` or an IPv4 address, "
                         "optionally with :PORT (no scheme, no path)")
    return Pattern(host[2:] if host.startswith("*.") else host, host.startswith("*."), port)


class HostPolicy:
    """An allow-list of patterns plus exact `host:port` pairs added at run time (the node's LLM
    proxy). `decide(host, port)` returns None when allowed, else the reason it is not."""

    def __init__(self, patterns: list[str] | tuple[str, ...] = DEFAULT_ALLOW) -> None:
        self.patterns = tuple(parse_pattern(p) for p in patterns)
        self.texts = tuple(patterns)
        self._exact: set[tuple[str, int]] = set()

    def add_exact(self, host: str, port: int) -> None:
        """Also allow exactly `host:port` (used for the node's LLM proxy)."""
        self._exact.add((normal_host(host), port))

    def is_exact(self, host: str, port: int) -> bool:
        """Whether `host:port` was added with `add_exact`."""
        return (normal_host(host), port) in self._exact

    def decide(self, host: str, port: int) -> str | None:
        host = normal_host(host)
        if (host, port) in self._exact or any(p.matches(host, port) for p in self.patterns):
            return None
        return f"{host}:{port} is not on the allow-list"
