"""Keeping secrets out of everything reb-ray writes (Parquet rows, logs, the console).

The only secrets a sandbox ever sees are the agent's own credentials (an LLM agent's are a
per-trial stand-in key; the real key stays with the metering proxy); whatever the agent echoes, writes into its report or leaves in its output,
their values are replaced by `MASK` in every row before it reaches a sink.
"""

from __future__ import annotations

from typing import Any, Iterable

MASK = "***"
MIN_SECRET_CHARS = 4  # shorter values would mask ordinary text


class Redactor:
    """Replaces each secret value (a string of >= MIN_SECRET_CHARS) with MASK."""

    def __init__(self, secrets: Iterable[str]) -> None:
        # Longest first, so a secret that contains another is masked whole.
        self._secrets = sorted({s for s in secrets if s and len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True)

    @property
    def secrets(self) -> list[str]:
        """The values masked, longest first (for streams masked outside this class: artifacts)."""
        return list(self._secrets)

    def text(self, value: str) -> str:
        for secret in self._secrets:
            value = value.replace(secret, MASK)
        return value

    def value(self, value: Any) -> Any:
        """Masks strings, and strings inside lists and dicts; other values are returned as-is."""
        if not self._secrets:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        return value

    def row(self, row: dict) -> dict:
        return {k: self.value(v) for k, v in row.items()}
